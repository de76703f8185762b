/**
 * `optmark bench load [options]`: the command line of the capacity test, whose code lives in bench/load/
 * (dist/bench/load/ in the package). It starts the real server on a loopback port (or targets --url),
 * drives it open-loop at stepped rates, runs a naive server on the same inputs for ratios, and writes
 * load-report.json, load-report.md and load-latency.svg to --out. The micro-benchmarks run with `npm run bench`.
 */
import { type Command, Option } from 'commander';
import { commaList, exitWith, nonNegativeNumber, positiveNumber, positiveWholeNumber, wholeNumber } from './args.js';

/** The options of `bench load` as commander parses them; bench/load/command.ts turns them into a run. */
export interface LoadFlags {
  out?: string;
  images?: string;
  image?: string;
  scenarios?: string[];
  mix?: string;
  rates?: number[];
  duration?: number;
  warmup?: number;
  p99?: number;
  arrivals: 'poisson' | 'uniform';
  skipConstantRate?: boolean;
  skipTransportBaseline?: boolean;
  maxOutstanding?: number;
  maxSteps?: number;
  memory?: boolean;
  memoryUploads?: number;
  memoryMib?: number;
  memorySettle?: number;
  skipNaive?: boolean;
  skipProfile?: boolean;
  url?: string[];
  key?: string;
  pid?: number;
  logLevel?: string;
  smoke?: boolean;
  clearCache?: boolean;
}

/** What bench/load/command.js exports (it declares itself as this type, so the compiler checks both sides). */
export interface LoadLab {
  /** Runs `bench load` with the parsed flags and the command line as given; the exit code. */
  load(flags: LoadFlags, argv: string[]): Promise<number>;
}

/**
 * The lab's entry point, found from this file's place in the package (dist/src/commands/ beside dist/bench/)
 * and imported only when `bench load` runs, so `optmark serve` never loads the load generator. The product
 * does not import bench/ by a relative module path (a house rule: nothing in src/ depends on the lab at
 * build time), hence a URL.
 */
const LAB = new URL('../../bench/load/command.js', import.meta.url);

function rateList(raw: string): number[] {
  return commaList(raw).map(positiveNumber);
}

export function register(program: Command): void {
  const bench = program
    .command('bench')
    .summary('capacity test: `bench load` drives the real server open-loop and writes reports')
    .description('Capacity test. The micro-benchmarks run with `npm run bench`.');

  bench
    .command('load')
    .summary('drive the real server open-loop at stepped rates and write the capacity report')
    .description(
      'Start optmark (and a naive single-thread server for comparison) on loopback ports, drive them open-loop at ' +
        'stepped request rates up to saturation, and write load-report.json, load-report.md and load-latency.svg. ' +
        'OPTMARK_* variables in the environment configure the server under test. The generated images are cached in ' +
        "$XDG_CACHE_HOME/optmark (by default ~/.cache/optmark; --clear-cache removes them); the servers' logs go to <out>/logs, " +
        'and their temporary folders are removed however the run ends.',
    )
    .option('--out <dir>', 'where the reports go', './bench-results')
    .option('--images <dir>', 'your own JPEG/PNG/WebP files instead of the generated corpus')
    .option('--image <name>', 'corpus image for the protect and verify scenarios (default jpeg-12mp)')
    .option('--scenarios <list>', 'protect,verify,mix (default all three; "none" for only the memory test)', commaList)
    .option(
      '--mix <weights>',
      'how often the mix sends each operation per image, e.g. protect=1 or protect=4,verify=1 (default protect=1,verify=1); ' +
        'every image of the corpus or of --images is sent equally often, so the folder sets the formats',
    )
    .option('--rates <list>', 'offered rates in req/s, e.g. 5,10,20 (default: a ladder from a calibration)', rateList)
    .option('--duration <s>', 'seconds per step (default 10)', positiveNumber)
    .option('--warmup <s>', "seconds of unrecorded load at each step's rate before it is measured (default 2)", nonNegativeNumber)
    .option('--p99 <ms>', 'p99 target for the sustainable rate (default 500)', positiveNumber)
    .addOption(new Option('--arrivals <kind>', 'arrival process').choices(['poisson', 'uniform']).default('poisson'))
    .option(
      '--skip-constant-rate',
      'with poisson arrivals, do not re-run the protect and verify steps below 80% of the best rate with evenly spaced arrivals (where the p99/p50 target is judged)',
    )
    .option('--skip-transport-baseline', "do not run the transport baseline beside that pass (optmark's transport and bytes, SHA-256 only)")
    .option('--max-outstanding <n>', 'requests in flight at most; more are counted "not sent" (default 128)', positiveWholeNumber)
    .option('--max-steps <n>', 'steps per scenario at most (default 10)', positiveWholeNumber)
    .option('--memory', 'also run the memory test: 64 concurrent 25 MiB uploads, default config')
    .option('--memory-uploads <n>', 'uploads in the memory test (default 64)', positiveWholeNumber)
    .option('--memory-mib <n>', 'size of each memory-test upload in MiB (default 25)', positiveNumber)
    .option('--memory-settle <s>', 'seconds of idle watched after the memory test (default 30)', positiveNumber)
    .option('--skip-naive', 'do not run the naive server')
    .option('--skip-profile', 'skip the unloaded per-image cost table')
    .option(
      '--url <url>',
      'target a running server instead (with --key; add --pid for its memory figures); give it again for more instances of one deployment, or give the load balancer',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option('--key <key>', 'API key for --url')
    .option('--pid <n>', 'process id of the --url server, when it runs on this machine', wholeNumber)
    .option('--log-level <level>', 'log level of the started server (default: its own default, info)')
    .option('--smoke', 'a tiny run (1 MP image, 2 short steps) that checks the suite works')
    .option('--clear-cache', 'remove the generated corpus cache ($XDG_CACHE_HOME/optmark, by default ~/.cache/optmark; about 33 MB) and exit')
    .action(async (flags: LoadFlags) => {
      // The command line as given, for the report's header.
      const lab = (await import(LAB.href)) as LoadLab;
      exitWith(await lab.load(flags, process.argv.slice(process.argv.indexOf('load', 2) + 1)));
    });
}
