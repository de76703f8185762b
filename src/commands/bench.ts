/**
 * `optmark bench load [options]`: the capacity test (src/capacity/). It starts the real server on a
 * loopback port (or targets --url), drives it open-loop at stepped rates, runs a naive server on the
 * same inputs for ratios, and writes load-report.json, load-report.md and load-latency.svg to --out.
 * The micro-benchmarks run with `npm run bench`.
 */
import { parseCommandArgs, UsageError, wholeNumber } from './args.js';

const HELP = `usage: optmark bench load [options]

Starts optmark (and a naive single-thread server for comparison) on loopback ports, drives them
open-loop at stepped request rates up to saturation, and writes load-report.json, load-report.md and
load-latency.svg. OPTMARK_* variables in the environment configure the server under test.

  --out DIR              where the reports go (default ./bench-results)
  --images DIR           your own JPEG/PNG/WebP files instead of the generated corpus
  --image NAME           corpus image for the protect and verify scenarios (default jpeg-12mp)
  --scenarios LIST       protect,verify,mix (default all three; "none" for only the memory test)
  --mix WEIGHTS          how often the mix sends each operation per image, e.g. protect=1 (protect
                         only) or protect=4,verify=1 (default protect=1,verify=1); every image of the
                         corpus or of --images is sent equally often, so the folder sets the formats
  --rates LIST           offered rates in req/s, e.g. 5,10,20 (default: a ladder from a calibration)
  --duration S           seconds per step (default 10)
  --warmup S             seconds of unrecorded load at each step's rate before it is measured (default 2)
  --p99 MS               p99 target for the sustainable rate (default 500)
  --arrivals KIND        poisson or uniform (default poisson)
  --skip-constant-rate   with poisson arrivals, do not re-run the protect and verify steps below 80% of
                         the best rate with evenly spaced arrivals (where the p99/p50 target is judged)
  --skip-transport-baseline
                         do not run the transport baseline beside that pass (optmark's transport and
                         bytes, SHA-256 only): what this machine alone costs in p99/p50
  --max-outstanding N    requests in flight at most; more are counted "not sent" (default 128)
  --max-steps N          steps per scenario at most (default 10)
  --memory               also run the memory test: 64 concurrent 25 MiB uploads, default config
  --memory-uploads N     uploads in the memory test (default 64)
  --memory-mib N         size of each memory-test upload in MiB (default 25)
  --memory-settle S      seconds of idle watched after the memory test (default 30)
  --skip-naive           do not run the naive server
  --skip-profile         skip the unloaded per-image cost table
  --url URL --key KEY    target a running server instead (add --pid N if it runs on this machine)
  --log-level LEVEL      log level of the started server (default: its own default, info)
  --smoke                a tiny run (1 MP image, 2 short steps) that checks the suite works
`;

function list(flag: string, raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new UsageError(`${flag} expects a comma-separated list`);
  return items;
}

function nonNegative(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0) throw new UsageError(`${flag} expects a number of at least 0, got ${JSON.stringify(raw)}`);
  return n;
}

function positive(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${flag} expects a positive number, got ${JSON.stringify(raw)}`);
  return n;
}

export async function main(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    process.stdout.write(HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'load') throw new UsageError(`bench: unknown subcommand "${sub}" (the micro-benchmarks run with \`npm run bench\`)`);
  const { values, positionals } = parseCommandArgs('bench load', rest, {
    out: { type: 'string' },
    images: { type: 'string' },
    image: { type: 'string' },
    scenarios: { type: 'string' },
    mix: { type: 'string' },
    rates: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    'skip-constant-rate': { type: 'boolean' },
    'skip-transport-baseline': { type: 'boolean' },
    p99: { type: 'string' },
    arrivals: { type: 'string' },
    'max-outstanding': { type: 'string' },
    'max-steps': { type: 'string' },
    memory: { type: 'boolean' },
    'memory-uploads': { type: 'string' },
    'memory-mib': { type: 'string' },
    'memory-settle': { type: 'string' },
    'skip-naive': { type: 'boolean' },
    'skip-profile': { type: 'boolean' },
    url: { type: 'string' },
    key: { type: 'string' },
    pid: { type: 'string' },
    'log-level': { type: 'string' },
    smoke: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (positionals.length) throw new UsageError(`bench load: unexpected argument ${JSON.stringify(positionals[0])}`);
  // Loaded only here: `optmark serve` never pays for the load generator.
  const { DEFAULTS, runLoad } = await import('../capacity/index.js');
  const { parseMix } = await import('../capacity/corpus.js');

  const scenarioList = list('--scenarios', values.scenarios);
  const scenarios = scenarioList?.[0] === 'none' ? [] : (scenarioList ?? DEFAULTS.scenarios);
  for (const s of scenarios) if (!['protect', 'verify', 'mix'].includes(s)) throw new UsageError(`--scenarios: unknown scenario "${s}" (protect, verify, mix, none)`);
  let mix = DEFAULTS.mix;
  if (values.mix !== undefined) {
    try {
      mix = parseMix(values.mix);
    } catch (e) {
      throw new UsageError(`--mix ${(e as Error).message}`);
    }
  }
  const rates = list('--rates', values.rates)?.map((r) => positive('--rates', r)!);
  const arrivals = values.arrivals ?? DEFAULTS.arrivals;
  if (arrivals !== 'poisson' && arrivals !== 'uniform') throw new UsageError('--arrivals expects poisson or uniform');
  const smoke = values.smoke ?? false;
  if (values.url && !values.key) throw new UsageError('--url needs --key');

  const report = await runLoad({
    ...DEFAULTS,
    url: values.url,
    key: values.key,
    pid: wholeNumber('--pid', values.pid),
    images: values.images,
    image: values.image,
    scenarios: scenarios as Array<'protect' | 'verify' | 'mix'>,
    mix,
    rates: rates ?? (smoke ? [2, 4] : undefined),
    durationS: positive('--duration', values.duration) ?? (smoke ? 1 : DEFAULTS.durationS),
    warmupS: nonNegative('--warmup', values.warmup) ?? (smoke ? 0.5 : DEFAULTS.warmupS),
    constantRate: !values['skip-constant-rate'],
    transportBaseline: !values['skip-transport-baseline'],
    p99TargetMs: positive('--p99', values.p99) ?? DEFAULTS.p99TargetMs,
    arrivals,
    maxOutstanding: wholeNumber('--max-outstanding', values['max-outstanding']) ?? DEFAULTS.maxOutstanding,
    maxSteps: wholeNumber('--max-steps', values['max-steps']) ?? DEFAULTS.maxSteps,
    naive: !values['skip-naive'],
    profile: !values['skip-profile'],
    memory: values.memory ?? false,
    memoryUploads: wholeNumber('--memory-uploads', values['memory-uploads']) ?? DEFAULTS.memoryUploads,
    memoryBytes: Math.round((positive('--memory-mib', values['memory-mib']) ?? 25) * 1024 * 1024),
    memorySettleS: positive('--memory-settle', values['memory-settle']) ?? (smoke ? 2 : DEFAULTS.memorySettleS),
    out: values.out ?? DEFAULTS.out,
    smoke,
    logLevel: values['log-level'],
    command: `optmark bench ${args.join(' ')}`,
  });

  process.stdout.write('\ntargets:\n');
  for (const t of report.targets) {
    const mark = t.met === undefined ? 'not judged' : t.met ? 'met' : 'MISSED';
    process.stdout.write(`  [${mark}] ${t.text}: ${t.value === undefined ? 'n/a' : t.value.toFixed(2)} (limit ${t.limit.toFixed(2)}); ${t.evidence}\n`);
  }
  process.stdout.write(`\nwrote ${report.files.json}\n      ${report.files.markdown}\n      ${report.files.chart}\n`);
  return 0;
}
