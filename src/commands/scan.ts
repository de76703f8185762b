/**
 * `optmark scan <source>...`: a repository scan without a server (docs/scans.md). Each source (a git
 * repository, a page, a manifest, a tar shard, a local folder, file or file:// URL) is walked as the
 * server's scans walk it, every image gets what `optmark verify` reports (the same lanes and layers),
 * a line per image, a JSON Lines --report of the items, and the summary counts at the end.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { SKIP_FINGERPRINT_HINT } from '../errors.js';
import { readyForBatch } from '../named-files.js';
import type { ScanCounts, ScanErrorCode, ScanItem } from '../scans/types.js';
import { exitWith, positiveWholeNumber, UsageError } from './args.js';

export const EXIT_OK = 0;
export const EXIT_SOME_FAILED = 1;
export const EXIT_SCAN_FAILED = 2;
export const EXIT_INTERRUPTED = 130;

export interface ScanOptions {
  sources: string[];
  report: string | undefined;
  followLinks: boolean;
  maxImages: number | undefined;
  allowNetworks: string[];
  jobs: number | undefined;
  skipFingerprint: boolean;
  type: string | undefined;
}

/** One human line for an item. */
export function scanLine(item: ScanItem): string {
  if (item.error) return `${item.location}: failed: ${item.error.message} (${item.error.code})`;
  const optOut = item.optedOut ? `opted out (${item.signals.join(', ')})` : 'NOT opted out';
  const served = item.servedSignals.length ? `; served: ${item.servedSignals.join(', ')}` : '';
  const p = item.provenance as { present: boolean; valid: boolean; verifiable: boolean };
  const f = item.fingerprint as { present: boolean; confidence: number; blocks: number };
  const provenance = !p.present ? 'no tag' : p.valid ? 'valid' : p.verifiable ? 'INVALID' : 'not verifiable (unknown key)';
  const fingerprint = f.blocks === 0 ? 'not examined' : f.present ? `found (confidence ${f.confidence})` : 'not found';
  return `${item.location}: ${optOut}${served}; provenance: ${provenance}; fingerprint: ${fingerprint}`;
}

/** The summary's line. */
export function summaryLine(c: ScanCounts): string {
  return (
    `scanned ${c.images} images: ${c.optedOut} opted out (embedded), ${c.servedOptOut} opted out where served, ${c.noOptOut} with no opt-out; ` +
    `marked by this server ${c.ours}, of which ${c.oursStripped} with no embedded opt-out left; failed ${c.failed}; skipped ${c.skipped}`
  );
}

/** Runs `optmark scan` with checked options; returns the exit status. */
export async function runScanCommand(opts: ScanOptions): Promise<number> {
  const [
    { DEFAULT_SCAN_LIMITS },
    { AddressPolicy, parseNetworks },
    { createFetcher },
    { runScan },
    { ScanLanes },
    { ReportWriter, Progress },
    { laneInit },
    { parseScanSource },
  ] = await Promise.all([
    import('../scans/limits.js'),
    import('../scans/net/address.js'),
    import('../scans/net/fetcher.js'),
    import('../scans/run.js'),
    import('../scans/lanes.js'),
    import('../batch/report.js'),
    import('../batch/command.js'),
    import('../scans/sources/index.js'),
  ]);
  let policy: InstanceType<typeof AddressPolicy>;
  try {
    policy = new AddressPolicy(parseNetworks(opts.allowNetworks.join(',')));
    for (const s of opts.sources) parseScanSource(s, opts.type);
  } catch (err) {
    process.stderr.write(`optmark scan: ${(err as Error).message}\n`);
    return EXIT_SCAN_FAILED;
  }
  const loaded = loadConfig();
  const fingerprint = !opts.skipFingerprint && loaded.fingerprintDetect;
  const config = await readyForBatch(loaded, { fingerprint, c2pa: false, secretHint: SKIP_FINGERPRINT_HINT });
  if (typeof config === 'string') {
    process.stderr.write(`optmark scan: ${config}\n`);
    return EXIT_SCAN_FAILED;
  }
  // Without a server there is no budget to share: images, bytes and time are unbounded unless asked.
  const limits = {
    ...DEFAULT_SCAN_LIMITS,
    maxImages: opts.maxImages ?? Number.POSITIVE_INFINITY,
    maxBytes: Number.POSITIVE_INFINITY,
    maxWallMs: Number.POSITIVE_INFINITY,
  };
  const stop = new AbortController();
  const onSignal = (): void => {
    if (stop.signal.aborted) process.stderr.write('optmark scan: finishing the images under way, then stopping\n');
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const skipped = new Map<string, number>();
  const onSkipped = (_location: string, code: ScanErrorCode): void => void skipped.set(code, (skipped.get(code) ?? 0) + 1);
  const lanes = new ScanLanes(
    {
      command: 'verify',
      init: laneInit(config),
      provenance: false,
      fingerprint: false,
      hash: true,
      skipExisting: undefined,
      keepTime: false,
      fsync: false,
      skipFingerprint: opts.skipFingerprint,
    },
    opts.jobs ?? availableParallelism(),
  );
  const folder = await mkdtemp(join(tmpdir(), 'optmark-scan-'));
  const report = opts.report !== undefined ? new ReportWriter(opts.report) : undefined;
  const lines = opts.report === '-' ? undefined : new ReportWriter('-');
  const progress = new Progress('scanning', process.stderr);
  let outcome;
  const fetcher = createFetcher({ limits, policy, signal: stop.signal, skipped: onSkipped });
  try {
    await lanes.prepare();
    outcome = await runScan({
      sources: opts.sources,
      type: opts.type as Parameters<typeof runScan>[0]['type'],
      ctx: { fetcher, limits, folder, allowLocal: true, followLinks: opts.followLinks, signal: stop.signal, policy, skipped: onSkipped },
      deps: { verify: (bytes) => lanes.verify(bytes) },
      width: lanes.width,
      onItem(item) {
        report?.write(item);
        progress.add(item.error !== null);
        lines?.text(`${scanLine(item)}\n`);
      },
    });
  } finally {
    progress.end();
    lines?.flush();
    report?.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    fetcher.close();
    await lanes.close();
    await rm(folder, { recursive: true, force: true });
  }
  const { counts, failed, stoppedAtLimit } = outcome;
  counts.skipped += [...skipped.values()].reduce((a, b) => a + b, 0);
  const out = opts.report === '-' ? process.stderr : process.stdout;
  for (const f of failed) process.stderr.write(`optmark scan: ${f.source}: ${f.message} (${f.code})\n`);
  const why = [...skipped].map(([code, n]) => `${code} ${n}`).join(', ');
  out.write(`${summaryLine(counts)}${why ? ` (${why})` : ''}\n`);
  if (stoppedAtLimit) out.write(`stopped at --max-images ${opts.maxImages}\n`);
  if (stop.signal.aborted) {
    process.stderr.write(`optmark scan: interrupted after ${counts.images} images\n`);
    return EXIT_INTERRUPTED;
  }
  if (failed.length > 0) return EXIT_SCAN_FAILED;
  return counts.failed > 0 ? EXIT_SOME_FAILED : EXIT_OK;
}

interface ScanFlags {
  report?: string;
  followLinks?: boolean;
  maxImages?: number;
  allowNetwork?: string[];
  jobs?: number;
  skipFingerprint?: boolean;
  type?: string;
}

/** Registers `optmark scan` on the command line. */
export function register(program: Command): void {
  program
    .command('scan')
    .summary('scan repositories, pages, dataset manifests, tar shards and folders for images and the opt-outs they carry or are served with')
    .description(
      "Walk each source as the server's repository scans do (docs/scans.md): a git repository (https://, http://, git://), a web page, " +
        'a dataset manifest (URL list, CSV/TSV, JSONL, Parquet), a tar shard, or a local folder, file or file:// URL; every JPEG, PNG ' +
        'and WebP found (by content) gets what `optmark verify` reports, and the signals served with it over HTTP.',
    )
    .usage('<source>... [options]')
    .argument('<sources...>', 'URLs, folders or files')
    .option('--report <file.jsonl>', "one JSON line per image, as the API's scan results ('-': standard output, instead of the lines)")
    .option('--type <type>', 'what the sources are, instead of telling from the URL and the first answer: git, page, manifest, tar, local')
    .option('--follow-links', 'from a page, follow same-origin links (up to the page and depth limits)')
    .option('--max-images <n>', 'stop after this many images', positiveWholeNumber)
    .option('--allow-network <cidr...>', 'admit these networks (loopback and private ones are refused by default), as OPTMARK_SCAN_ALLOW_NETWORKS')
    .option('-j, --jobs <n>', `images verified at once, each on its own thread (default: the CPUs, here ${availableParallelism()})`, positiveWholeNumber)
    .option('--skip-fingerprint', 'leave the pixel detector out (the fingerprint reported as not examined)')
    .addHelpText(
      'after',
      '\nPrints one line per image, then the counts. Exit status: 0 every source scanned and every image read, 1 some images could not be read, ' +
        '2 usage error or a source could not be scanned (its code on stderr), 130 interrupted.\n',
    )
    .action(async (sources: string[], o: ScanFlags) => {
      if (o.type !== undefined && !['git', 'page', 'manifest', 'tar', 'local'].includes(o.type))
        throw new UsageError(`scan: --type is git, page, manifest, tar or local, not ${o.type}`);
      exitWith(
        await runScanCommand({
          sources,
          report: o.report,
          followLinks: o.followLinks === true,
          maxImages: o.maxImages,
          allowNetworks: o.allowNetwork ?? [],
          jobs: o.jobs,
          skipFingerprint: o.skipFingerprint === true,
          type: o.type,
        }),
      );
    });
}
