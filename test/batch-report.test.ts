/**
 * The batch's outputs that are not files: the progress line (rate, ETA), the report line's shape, the
 * summary's cap, the report writer, and the sources' streaming of lists (CRLF, NUL, partial records).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { formatDuration, progressLine, ReportWriter, reportLine, Tally } from '../src/batch/report.js';
import { fromList, type Entry } from '../src/batch/sources.js';
import type { FileOutcome } from '../src/batch/work.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('progress line', () => {
  it('shows the bar, the count, the rate and the time left once the total is known', () => {
    expect(progressLine('marking', 50, 0, 200, 10, 10)).toBe('marking [###.......] 50/200, 5.0 files/s, ETA 0:30');
    expect(progressLine('marking', 1500, 2, 100_000, 3, 10)).toBe('marking [..........] 1500/100000, 500 files/s, ETA 3:17, 2 failed');
    expect(progressLine('verifying', 7, 0, undefined, 2)).toBe('verifying 7 files, 3.5 files/s');
    expect(progressLine('marking', 0, 0, 10, 0, 10)).toBe('marking [..........] 0/10, 0.0 files/s, ETA --:--');
  });

  it('formats durations as m:ss and h:mm:ss', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(61.4)).toBe('1:01');
    expect(formatDuration(3 * 3600 + 5 * 60 + 9)).toBe('3:05:09');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('--:--');
  });
});

describe('report', () => {
  const outcome = (i: number, status: FileOutcome['status'], code: string | null = null): FileOutcome => ({
    input: `in/${i}.jpg`,
    output: status === 'done' ? `out/${i}.jpg` : null,
    format: 'jpeg',
    bytes: status === 'done' ? 1000 + i : null,
    sha256: status === 'done' ? 'ab'.repeat(32) : null,
    status,
    code,
    ...(status !== 'done' ? { message: 'why' } : {}),
  });

  it('a line has the fixed fields in order, nulls where nothing applies', () => {
    expect(Object.keys(reportLine(outcome(1, 'done')))).toEqual(['input', 'output', 'format', 'bytes', 'sha256', 'status', 'code']);
    expect(reportLine(outcome(2, 'failed', 'damaged_image'))).toEqual({
      input: 'in/2.jpg',
      output: null,
      format: 'jpeg',
      bytes: null,
      sha256: null,
      status: 'failed',
      code: 'damaged_image',
      message: 'why',
    });
  });

  it('the writer writes every line, in order, by the time it is closed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'optmark-report-'));
    dirs.push(dir);
    const path = join(dir, 'r.jsonl');
    const w = new ReportWriter(path);
    for (let i = 0; i < 5000; i++) w.write(reportLine(outcome(i, 'done')));
    w.close();
    const lines = readFileSync(path, 'utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(5000);
    expect(lines.map((l) => (JSON.parse(l) as { input: string }).input)).toEqual(Array.from({ length: 5000 }, (_, i) => `in/${i}.jpg`));
  });

  it('the summary names the first skipped and failed files and counts the rest', () => {
    const t = new Tally();
    for (let i = 0; i < 70; i++) t.add(outcome(i, 'failed', 'damaged_image'));
    t.add(outcome(100, 'skipped', 'up_to_date'));
    t.add(outcome(101, 'done'));
    expect(t.counts).toEqual({ done: 1, skipped: 1, failed: 70 });
    const details = t.details(' (see r.jsonl)');
    expect(details[0]).toBe('skipped  in/100.jpg: why');
    expect(details[1]).toBe('failed   in/0.jpg: why (damaged_image)');
    expect(details).toHaveLength(1 + 50 + 1);
    expect(details.at(-1)).toBe('failed   ... and 20 more (see r.jsonl)');
  });
});

describe('lists (--files-from)', () => {
  async function entries(chunks: string[], sep: '\n' | '\0'): Promise<Entry[]> {
    const out: Entry[] = [];
    for await (const e of fromList(Readable.from(chunks.map((c) => Buffer.from(c))), sep, {})) out.push(e);
    return out;
  }

  it('names split across chunks, CRLF, blank lines; NUL-separated names may hold newlines', async () => {
    const a = await entries(['/nonexistent/a', '.jpg\r\n\n/nonexis', 'tent/b c.png'], '\n');
    expect(a.map((e) => e.input)).toEqual(['/nonexistent/a.jpg', '/nonexistent/b c.png']);
    expect(a.every((e) => e.kind === 'passed' && e.status === 'failed' && e.code === 'read_enoent')).toBe(true);
    const b = await entries(['/nonexistent/x\ny.jpg\0/nonexistent/', 'z.jpg\0'], '\0');
    expect(b.map((e) => e.input)).toEqual(['/nonexistent/x\ny.jpg', '/nonexistent/z.jpg']);
  });
});
