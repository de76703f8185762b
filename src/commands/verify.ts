/**
 * `optmark verify <file-or-folder>...`: per file, what POST /api/v1/verify reports (the same
 * verifyReport over the same layers), at ingestion scale: folders streamed, --files-from, --jobs,
 * a JSON Lines --report, and --skip-fingerprint for a pipeline that only asks "is this opted out?"
 * (the metadata read alone; the answer then says `blocks: 0`, as for an image not examined).
 */
import type { Command } from 'commander';
import { availableParallelism } from 'node:os';
import type { Found } from '../batch/sources.js';
import type { FileOutcome } from '../batch/work.js';
import { loadConfig } from '../config.js';
import { SKIP_FINGERPRINT_HINT } from '../errors.js';
import { readyForBatch } from '../named-files.js';
import { exitWith, positiveWholeNumber, UsageError } from './args.js';

export interface VerifyOptions {
  inputs: string[];
  filesFrom: string | undefined;
  nul: boolean;
  jobs: number | undefined;
  report: string | undefined;
  skipFingerprint: boolean;
  sha256: boolean;
}

export function checkVerifyOptions(o: VerifyOptions): VerifyOptions {
  if (o.filesFrom !== undefined && o.inputs.length > 0) throw new UsageError('verify: give files and folders or --files-from, not both');
  if (o.filesFrom === undefined && o.inputs.length === 0) throw new UsageError('verify: give at least one file or folder (or --files-from)');
  if (o.nul && o.filesFrom === undefined) throw new UsageError('verify: --null applies to --files-from');
  return o;
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
  // Loaded here, not at the top: `optmark verify --help` and the other commands do not pay for them.
  const [{ laneInit, runCommand }, { ReportWriter }] = await Promise.all([import('../batch/command.js'), import('../batch/report.js')]);
  // The detector's secret (the instances' shared one, a named file or the data directory's own), loaded
  // once before any file.
  const loaded = loadConfig();
  const fingerprint = !opts.skipFingerprint && loaded.fingerprintDetect;
  const config = await readyForBatch(loaded, { fingerprint, c2pa: false, secretHint: SKIP_FINGERPRINT_HINT });
  if (typeof config === 'string') {
    process.stderr.write(`optmark verify: ${config}\n`);
    return 1;
  }
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
        // The hash reads every file whole: the metadata-only mode leaves it out unless asked for.
        hash: !opts.skipFingerprint || opts.sha256,
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

interface VerifyFlags {
  skipFingerprint?: boolean;
  sha256?: boolean;
  filesFrom?: string;
  null?: boolean;
  jobs?: number;
  report?: string;
}

/** Registers `optmark verify` on the command line. */
export function register(program: Command): void {
  program
    .command('verify')
    .summary('verify files and folders as POST /api/v1/verify does (opt-out field, provenance tag, fingerprint)')
    .description(
      'Report, for every JPEG, PNG and WebP file given, found in the folders (recursively) or listed (--files-from), what ' +
        'POST /api/v1/verify reports for it (the same code): the opt-out field, the provenance tag and the in-pixel fingerprint.',
    )
    .usage('<file-or-folder>... [options]\n       optmark verify --files-from <list|-> [options]')
    .argument('[inputs...]', 'files and folders (folders are walked recursively)')
    .option(
      '--skip-fingerprint',
      "leave the pixel detector out: the metadata read alone (a JPEG's first bytes), the fingerprint reported as not examined (present false, confidence 0, blocks 0) and sha256 null unless --sha256",
    )
    .option('--sha256', "with --skip-fingerprint: hash every file too (the API's sha256 field; without it null), which reads each file whole")
    .option('--files-from <list>', "read the paths from a file, or from standard input with '-', one a line")
    .option('-0, --null', 'the --files-from list is NUL-separated (find -print0)')
    .option('-j, --jobs <n>', `files read at once, each on its own thread (default: the CPUs, here ${availableParallelism()})`, positiveWholeNumber)
    .option(
      '--report <file.jsonl>',
      "one JSON line per file as it finishes: input, format, bytes, sha256, status, code and the API's optedOut, signals, provenance, fingerprint ('-': standard output, instead of the lines)",
    )
    .addHelpText(
      'after',
      '\nPrints one line per file, then a count. Exit status: 0 every file read (opted out or not), 1 some could not be read, 2 usage error, 130 interrupted.\n',
    )
    .action(async (inputs: string[], o: VerifyFlags) => {
      const opts = checkVerifyOptions({
        inputs,
        filesFrom: o.filesFrom,
        nul: o.null === true,
        jobs: o.jobs,
        report: o.report,
        skipFingerprint: o.skipFingerprint === true,
        sha256: o.sha256 === true,
      });
      exitWith(await runVerifyCommand(opts));
    });
}
