/**
 * `optmark bench load`: turns the parsed flags (src/commands/bench.ts, which imports this module only when
 * the command runs) into a load run, and prints the targets and the files written.
 */
import type { LoadFlags, LoadLab } from '../../src/commands/bench.js';
import { UsageError } from '../../src/commands/args.js';
import { clearCorpusCache, corpusCacheRoot, parseMix } from './corpus.js';
import { DEFAULTS, runLoad } from './index.js';

export const load: LoadLab['load'] = async (flags: LoadFlags, argv: string[]): Promise<number> => {
  if (flags.clearCache) {
    const { removed, bytes } = clearCorpusCache();
    process.stdout.write(
      removed.length === 0
        ? `no corpus cache to clear (it lives in ${corpusCacheRoot()})\n`
        : `removed ${removed.join(', ')} (${(bytes / 1e6).toFixed(1)} MB); the next run generates the corpus again\n`,
    );
    return 0;
  }
  const scenarios = flags.scenarios?.[0] === 'none' ? [] : (flags.scenarios ?? ['protect', 'verify', 'mix']);
  for (const s of scenarios)
    if (!['protect', 'verify', 'mix'].includes(s)) throw new UsageError(`bench load --scenarios: unknown scenario "${s}" (protect, verify, mix, none)`);
  if (flags.url && !flags.key) throw new UsageError('bench load: --url needs --key');
  let mix = DEFAULTS.mix;
  if (flags.mix !== undefined) {
    try {
      mix = parseMix(flags.mix);
    } catch (e) {
      throw new UsageError(`bench load --mix ${(e as Error).message}`);
    }
  }
  const smoke = flags.smoke ?? false;
  const report = await runLoad({
    ...DEFAULTS,
    url: flags.url?.[0],
    moreUrls: flags.url?.slice(1),
    key: flags.key,
    pid: flags.pid,
    images: flags.images,
    image: flags.image,
    scenarios: scenarios as Array<'protect' | 'verify' | 'mix'>,
    mix,
    rates: flags.rates ?? (smoke ? [2, 4] : undefined),
    durationS: flags.duration ?? (smoke ? 1 : DEFAULTS.durationS),
    warmupS: flags.warmup ?? (smoke ? 0.5 : DEFAULTS.warmupS),
    constantRate: !flags.skipConstantRate,
    transportBaseline: !flags.skipTransportBaseline,
    p99TargetMs: flags.p99 ?? DEFAULTS.p99TargetMs,
    arrivals: flags.arrivals,
    maxOutstanding: flags.maxOutstanding ?? DEFAULTS.maxOutstanding,
    maxSteps: flags.maxSteps ?? DEFAULTS.maxSteps,
    naive: !flags.skipNaive,
    profile: !flags.skipProfile,
    memory: flags.memory ?? false,
    memoryUploads: flags.memoryUploads ?? DEFAULTS.memoryUploads,
    memoryBytes: Math.round((flags.memoryMib ?? 25) * 1024 * 1024),
    memorySettleS: flags.memorySettle ?? (smoke ? 2 : DEFAULTS.memorySettleS),
    out: flags.out ?? DEFAULTS.out,
    smoke,
    logLevel: flags.logLevel,
    command: `optmark bench load ${argv.join(' ')}`.trimEnd(),
  });

  process.stdout.write('\ntargets:\n');
  for (const t of report.targets) {
    const mark = t.met === undefined ? 'not judged' : t.met ? 'met' : 'MISSED';
    process.stdout.write(`  [${mark}] ${t.text}: ${t.value === undefined ? 'n/a' : t.value.toFixed(2)} (limit ${t.limit.toFixed(2)}); ${t.evidence}\n`);
  }
  process.stdout.write(`\nwrote ${report.files.json}\n      ${report.files.markdown}\n      ${report.files.chart}\n`);
  return 0;
};
