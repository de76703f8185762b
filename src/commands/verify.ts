/**
 * `optmark verify <file-or-folder>...`: per file, what POST /api/v1/verify reports (the same
 * verifyReport over the same layers), at ingestion scale: folders streamed, --files-from, --jobs,
 * a JSON Lines --report, and --skip-fingerprint for a pipeline that only asks "is this opted out?"
 * (the metadata read alone; the answer then says `blocks: 0`, as for an image not examined).
 */
import { defaultJobs, EXIT_USAGE, laneInit, runCommand } from '../batch/command.js';
import { ReportWriter } from '../batch/report.js';
import type { Found } from '../batch/sources.js';
import type { FileOutcome } from '../batch/work.js';
import { loadConfig } from '../config.js';
import { parseCommandArgs, UsageError, wholeNumber } from './args.js';

export const VERIFY_HELP = `usage: optmark verify <file-or-folder>... [options]
       optmark verify --files-from <list|-> [options]

  Reports, for every JPEG, PNG and WebP file given, found in the folders (recursively) or listed,
  what POST /api/v1/verify reports: the opt-out field, the provenance tag, the in-pixel fingerprint.

  --skip-fingerprint       leave the pixel detector out: the metadata read alone (fingerprint
                           reported as not examined: present false, confidence 0, blocks 0)
  --files-from <list|->    read the paths from a file, or from standard input with '-', one a line
  -0, --null               the list is NUL-separated (find -print0)
  --jobs <n>               files read at once, each on its own thread (default: the CPUs, here \${cpus})
  --report <file.jsonl>    one JSON line per file as it finishes: input, format, bytes, sha256, status,
                           code, and the API's fields (optedOut, signals, provenance, fingerprint)
                           ('-': standard output, instead of the lines below)
  -h, --help               this help

  Prints one line per file, then a count. Exit status: 0 every file read (opted out or not), 1 some
  could not be read, 2 usage error, 130 interrupted.
`;

export interface VerifyOptions {
  inputs: string[];
  filesFrom: string | undefined;
  nul: boolean;
  jobs: number | undefined;
  report: string | undefined;
  skipFingerprint: boolean;
}

export function verifyHelpText(): string {
  return VERIFY_HELP.replace('${cpus}', String(defaultJobs()));
}

export function checkVerifyOptions(o: VerifyOptions): VerifyOptions {
  if (o.filesFrom !== undefined && o.inputs.length > 0) throw new UsageError('verify: give files and folders or --files-from, not both');
  if (o.filesFrom === undefined && o.inputs.length === 0) throw new UsageError(`verify: give at least one file or folder (or --files-from)\n\n${verifyHelpText()}`);
  if (o.nul && o.filesFrom === undefined) throw new UsageError('verify: --null applies to --files-from');
  if (o.jobs !== undefined && o.jobs < 1) throw new UsageError('verify: --jobs must be at least 1');
  return o;
}

function parseOptions(args: string[]): VerifyOptions | undefined {
  const { values, positionals } = parseCommandArgs('verify', args, {
    'skip-fingerprint': { type: 'boolean' },
    'files-from': { type: 'string' },
    null: { type: 'boolean', short: '0' },
    jobs: { type: 'string', short: 'j' },
    report: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  return checkVerifyOptions({
    inputs: positionals,
    filesFrom: values['files-from'],
    nul: values.null === true,
    jobs: wholeNumber('--jobs', values.jobs),
    report: values.report,
    skipFingerprint: values['skip-fingerprint'] === true,
  });
}

/** One human line for a file. */
export function verifyLine(o: FileOutcome): string {
  if (o.status !== 'done' || !o.report) return `${o.input}: ${o.status}: ${o.message ?? o.code ?? ''}${o.status === 'failed' && o.code ? ` (${o.code})` : ''}`;
  const r = o.report;
  const optOut = r.optedOut ? `opted out (${r.signals.join(', ')})` : 'NOT opted out';
  const p = r.provenance;
  const provenance = !p.present ? 'no tag' : p.valid ? 'valid' : p.verifiable ? 'INVALID' : 'not verifiable (unknown key)';
  const f = r.fingerprint;
  const fingerprint = f.blocks === 0 ? 'not examined' : f.present ? `found (confidence ${f.confidence})` : 'not found';
  return `${o.input}: ${optOut}; provenance: ${provenance}; fingerprint: ${fingerprint}`;
}

/** Runs `optmark verify` with checked options; returns the exit status. */
export async function runVerifyCommand(opts: VerifyOptions): Promise<number> {
  const config = loadConfig();
  const toStdout = opts.report !== '-';
  let optedOut = 0;
  let notOptedOut = 0;
  const lines = toStdout ? new ReportWriter('-') : undefined;
  let summary;
  try {
    summary = await runCommand({
    verb: 'verifying',
    inputs: opts.inputs,
    filesFrom: opts.filesFrom,
    nul: opts.nul,
    jobs: opts.jobs,
    report: opts.report,
    setup: {
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
    plan: (found: Found) => ({ input: found.input, source: found.source }),
    onOutcome(o) {
      if (o.report) {
        if (o.report.optedOut) optedOut++;
        else notOptedOut++;
      }
      lines?.text(`${verifyLine(o)}\n`);
    },
  });
  } finally {
    lines?.flush();
  }
  const { tally } = summary;
  const out = toStdout ? process.stdout : process.stderr;
  out.write(`verified ${tally.counts.done}: ${optedOut} opted out, ${notOptedOut} not; skipped ${tally.counts.skipped}, failed ${tally.counts.failed}\n`);
  return summary.exitCode;
}

/** Entry point of `optmark verify` (argument list after the command name). */
export async function main(args: string[]): Promise<number> {
  let opts: VerifyOptions | undefined;
  try {
    opts = parseOptions(args);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`optmark: ${err.message}\n`);
      return EXIT_USAGE;
    }
    throw err;
  }
  if (!opts) {
    process.stdout.write(verifyHelpText());
    return 0;
  }
  return runVerifyCommand(opts);
}
