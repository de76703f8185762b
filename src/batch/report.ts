/**
 * What a batch says while it runs and after: the machine-readable report (JSON Lines, one object per
 * file, written as files finish), the progress bar (only when stderr is a terminal), and the summary
 * with the files that were skipped or failed (the first of each; the report has them all).
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import type { FileOutcome } from './work.js';

/** Report lines are written in blocks of about this size (and at the end). */
const REPORT_FLUSH_BYTES = 64 * 1024;
/** ...or when the oldest unwritten line is this old, so a pipeline reading along is not kept waiting. */
const REPORT_FLUSH_MS = 250;
/** The progress bar is redrawn at most this often. */
const PROGRESS_INTERVAL_MS = 100;
/** Skipped and failed files listed in the summary, each; the rest are counted. */
const SUMMARY_LIST_MAX = 50;

/** A JSON Lines report (or any line output): a file (truncated first) or '-' for standard output, written in blocks. */
export class ReportWriter {
  readonly #fd: number;
  readonly #own: boolean;
  #buffer = '';
  #since = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(path: string) {
    this.#own = path !== '-';
    this.#fd = this.#own ? openSync(path, 'w') : 1;
  }

  write(line: object): void {
    this.text(`${JSON.stringify(line)}\n`);
  }

  /** Appends text as it is (whole lines). */
  text(text: string): void {
    if (this.#buffer === '') {
      this.#since = Date.now();
      // Lines do not wait longer than this for the next ones, so a pipeline reading along sees them.
      this.#timer ??= setTimeout(() => {
        this.#timer = undefined;
        this.flush();
      }, REPORT_FLUSH_MS).unref();
    }
    this.#buffer += text;
    if (this.#buffer.length >= REPORT_FLUSH_BYTES || Date.now() - this.#since >= REPORT_FLUSH_MS) this.flush();
  }

  flush(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    let data = Buffer.from(this.#buffer, 'utf8');
    this.#buffer = '';
    while (data.length > 0) data = data.subarray(writeSync(this.#fd, data));
  }

  close(): void {
    this.flush();
    if (this.#own) closeSync(this.#fd);
  }
}

/** The report line of an outcome: fixed keys first, absent values as null. */
export function reportLine(o: FileOutcome): object {
  const { input, output, format, bytes, sha256, status, changed, code, message, credentials, warnings, report } = o;
  return {
    input,
    ...(output !== undefined ? { output } : {}),
    format,
    bytes,
    sha256: sha256 ?? null,
    status,
    ...(changed !== undefined ? { changed } : {}),
    code,
    ...(message !== undefined ? { message } : {}),
    ...(credentials !== undefined ? { credentials } : {}),
    ...(warnings !== undefined ? { warnings } : {}),
    ...(report ?? {}),
  };
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** The progress line: bar, count, rate and estimated time left (once the total is known). */
export function progressLine(verb: string, done: number, failed: number, total: number | undefined, elapsedS: number, width = 30): string {
  const rate = elapsedS > 0 ? done / elapsedS : 0;
  const rateText = `${rate >= 100 ? Math.round(rate) : rate.toFixed(1)} files/s`;
  const failedText = failed > 0 ? `, ${failed} failed` : '';
  if (total === undefined) return `${verb} ${done} files, ${rateText}${failedText}`;
  const shown = Math.min(done, total);
  const filled = total > 0 ? Math.round((shown / total) * width) : width;
  const eta = rate > 0 ? formatDuration((total - shown) / rate) : '--:--';
  return `${verb} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${shown}/${total}, ${rateText}, ETA ${eta}${failedText}`;
}

/** A one-line progress bar on a terminal; nothing at all otherwise. */
export class Progress {
  readonly #stream: NodeJS.WriteStream | undefined;
  readonly #verb: string;
  readonly #started = performance.now();
  #total: number | undefined;
  #done = 0;
  #failed = 0;
  #drawnAt = 0;

  constructor(verb: string, stream: NodeJS.WriteStream) {
    this.#stream = stream.isTTY ? stream : undefined;
    this.#verb = verb;
  }

  get active(): boolean {
    return this.#stream !== undefined;
  }

  set total(n: number) {
    this.#total = n;
  }

  add(failed: boolean): void {
    this.#done++;
    if (failed) this.#failed++;
    const now = performance.now();
    if (now - this.#drawnAt >= PROGRESS_INTERVAL_MS) {
      this.#drawnAt = now;
      this.#stream?.write(`\r\x1b[2K${progressLine(this.#verb, this.#done, this.#failed, this.#total, (now - this.#started) / 1000)}`);
    }
  }

  end(): void {
    this.#stream?.write('\r\x1b[2K');
  }
}

/** Counts by status and the first skipped and failed files, for the summary. */
export class Tally {
  readonly counts = { done: 0, skipped: 0, failed: 0 };
  readonly #listed = { skipped: [] as string[], failed: [] as string[] };

  add(o: FileOutcome): void {
    if (o.status === 'rename') return;
    this.counts[o.status]++;
    if (o.status !== 'done') {
      const list = this.#listed[o.status];
      if (list.length < SUMMARY_LIST_MAX)
        list.push(`${o.status.padEnd(7)}  ${o.input}: ${o.message ?? o.code ?? ''}${o.status === 'failed' && o.code ? ` (${o.code})` : ''}`);
    }
  }

  get total(): number {
    return this.counts.done + this.counts.skipped + this.counts.failed;
  }

  /** The lines naming skipped and failed files, with a count of those left out. */
  details(reportHint: string): string[] {
    const lines: string[] = [];
    for (const status of ['skipped', 'failed'] as const) {
      lines.push(...this.#listed[status]);
      const more = this.counts[status] - this.#listed[status].length;
      if (more > 0) lines.push(`${status.padEnd(7)}  ... and ${more} more${reportHint}`);
    }
    return lines;
  }
}
