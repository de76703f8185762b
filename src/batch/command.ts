/**
 * What `optmark mark` and `optmark verify` share as batch tools: the file sources (arguments or
 * --files-from), the report, the progress bar, the summary, the interrupt message and the exit status
 * (0 every file done or skipped, 1 some failed, 2 usage error, 130 interrupted).
 */
import type { Config } from '../config.js';
import type { WorkerInit } from '../pool/tasks.js';
import { Progress, ReportWriter, reportLine, Tally } from './report.js';
import { runBatch, type BatchHooks } from './runner.js';
import { argumentClaims, countFiles, fromArguments, fromList, listClaims, openList, type Entry, type Found } from './sources.js';
import type { FileJob, FileOutcome, LaneSetup } from './work.js';

export { defaultJobs } from './runner.js';

export const EXIT_OK = 0;
export const EXIT_SOME_FAILED = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERRUPTED = 130;

export interface BatchCommand {
  /** 'marking' / 'verifying' (progress bar). */
  verb: string;
  inputs: string[];
  filesFrom: string | undefined;
  nul: boolean;
  jobs: number | undefined;
  report: string | undefined;
  skipDir?: string | undefined;
  setup: LaneSetup;
  plan(found: Found): FileJob | FileOutcome;
  /** Called for every outcome after the report line and the progress (per-file output). */
  onOutcome?(o: FileOutcome): void;
  /** The command's work around each file (runner.ts BatchHooks.around). */
  around?(job: FileJob, run: () => Promise<FileOutcome>): Promise<FileOutcome>;
}

export interface BatchSummary {
  tally: Tally;
  interrupted: boolean;
  exitCode: number;
  reportHint: string;
}

/** Largest file a batch reads (each lane holds one whole file in memory at a time). */
export const MAX_FILE_BYTES = 1024 ** 3;

/**
 * What a lane needs of the configuration: the same fields the server's workers get (pool.ts
 * workerInitFrom), built here so that the batch does not load the worker pool (piscina) at all.
 */
export function laneInit(config: Config): WorkerInit {
  return {
    dataDir: config.dataDir,
    // Not the server's upload limit (a 24 MP PNG is over its 25 MiB default): a lane holds one file.
    maxUploadBytes: Math.max(config.maxUploadBytes, MAX_FILE_BYTES),
    maxPixels: config.maxPixels,
    signingKeyFile: config.signingKeyFile,
    fingerprintSecretFile: config.fingerprintSecretFile,
    fingerprintDetect: config.fingerprintDetect,
    fingerprintTimeoutMs: config.fingerprintTimeoutMs,
    c2paMode: config.c2paMode,
    c2paCertFile: config.c2paCertFile,
    c2paKeyFile: config.c2paKeyFile,
  };
}

function entries(cmd: BatchCommand, lists?: NodeJS.ReadableStream[]): AsyncIterable<Entry> {
  const opts = { skipDir: cmd.skipDir };
  if (cmd.filesFrom !== undefined) {
    const stream = openList(cmd.filesFrom);
    lists?.push(stream);
    return fromList(stream, cmd.nul ? '\0' : '\n', opts);
  }
  return fromArguments(cmd.inputs, opts);
}

export async function runCommand(cmd: BatchCommand): Promise<BatchSummary> {
  const report = cmd.report !== undefined ? new ReportWriter(cmd.report) : undefined;
  const progress = new Progress(cmd.verb, process.stderr);
  const tally = new Tally();
  if (progress.active && cmd.filesFrom !== '-') {
    // A second, counting pass for the bar's total and ETA (streamed too); the bar shows the rate meanwhile.
    void countFiles(entries(cmd)).then(
      (n) => (progress.total = n),
      () => undefined,
    );
  }
  const lists: NodeJS.ReadableStream[] = [];
  const hooks: BatchHooks = {
    plan: cmd.plan,
    claimant: cmd.filesFrom !== undefined ? listClaims : argumentClaims(cmd.inputs, { skipDir: cmd.skipDir }),
    around: cmd.around,
    interrupt() {
      for (const l of lists) (l as NodeJS.ReadableStream & { destroy(): void }).destroy();
    },
    record(o) {
      tally.add(o);
      report?.write(reportLine(o));
      progress.add(o.status === 'failed');
      cmd.onOutcome?.(o);
    },
  };
  let result;
  try {
    result = await runBatch(entries(cmd, lists), cmd.setup, cmd.jobs, hooks);
  } finally {
    progress.end();
    report?.close();
    if (cmd.filesFrom === '-') process.stdin.destroy(); // an interrupted run must not wait for the rest of the list
  }
  const reportHint = cmd.report !== undefined && cmd.report !== '-' ? ` (see ${cmd.report})` : ' (--report FILE.jsonl lists them all)';
  const exitCode = result.interrupted ? EXIT_INTERRUPTED : tally.counts.failed > 0 ? EXIT_SOME_FAILED : EXIT_OK;
  if (result.interrupted) {
    process.stderr.write(
      `optmark: interrupted after ${tally.total} files (done ${tally.counts.done}, skipped ${tally.counts.skipped}, failed ${tally.counts.failed}); ` +
        'every output written is whole and no temporary file is left; the files not reached were not touched' +
        (cmd.verb === 'marking' ? ' (run again with --skip-existing to go on)' : '') +
        '\n',
    );
  }
  return { tally, interrupted: result.interrupted, exitCode, reportHint };
}
