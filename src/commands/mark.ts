/**
 * `optmark mark <file-or-folder>... (--out <dir> | --in-place)`: the opt-out field (and the chosen
 * layers) on many files, as an ingestion pipeline runs it. The opt-out path edits container bytes
 * only: it loads neither the decoder nor a worker pool, reads each file once into a reused buffer and
 * writes the result with one writev into a temporary file renamed into place (docs/batch.md has the
 * measurements). Lanes (--jobs) are the main thread plus batch worker threads given paths.
 */
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { availableParallelism } from 'node:os';
import type { CredentialsOutcome } from '../c2pa/modes.js';
import type { Found } from '../batch/sources.js';
import type { FileJob, FileOutcome } from '../batch/work.js';
import { loadConfig } from '../config.js';
import { dirErrorReason, fileErrorReason, makeDirs } from '../datadir.js';
import { readyForBatch } from '../named-files.js';
import { exitWith, positiveWholeNumber, UsageError } from './args.js';

export interface MarkOptions {
  inputs: string[];
  out: string | undefined;
  inPlace: boolean;
  provenance: boolean;
  fingerprint: boolean;
  /** The signal layers (docs/signals.md): TDMRep in the XMP, a C2PA manifest for files without one. */
  tdmrep: boolean;
  tdmPolicy: string | undefined;
  contentCredentials: boolean;
  filesFrom: string | undefined;
  nul: boolean;
  jobs: number | undefined;
  skipExisting: 'time' | 'hash' | undefined;
  report: string | undefined;
  fsync: boolean;
  /** --vault: the account whose Private Vault keeps each original and marked file (./mark-vault.ts). */
  vault?: string | undefined;
}

/** Checks the combination of options; throws UsageError (exit 2). */
export function checkMarkOptions(o: MarkOptions): MarkOptions {
  if (o.filesFrom !== undefined && o.inputs.length > 0) throw new UsageError('mark: give files and folders or --files-from, not both');
  if (o.filesFrom === undefined && o.inputs.length === 0) throw new UsageError('mark: give at least one file or folder (or --files-from)');
  if (o.nul && o.filesFrom === undefined) throw new UsageError('mark: --null applies to --files-from');
  if (o.inPlace && o.out !== undefined) throw new UsageError('mark: --out and --in-place exclude each other');
  if (!o.inPlace && o.out === undefined) throw new UsageError('mark: --out <dir> is required (or --in-place to replace the inputs)');
  if (o.inPlace && o.skipExisting !== undefined)
    throw new UsageError('mark: --skip-existing applies to --out (in place, a file already marked is left as it is anyway)');
  if (o.tdmPolicy !== undefined && !o.tdmrep) throw new UsageError('mark: --tdm-policy applies to --tdmrep');
  if (o.report !== undefined && o.report === o.filesFrom && o.report !== '-') throw new UsageError('mark: --report and --files-from name the same file');
  return o;
}

/** --skip-existing's optional value (commander parser): time (size and time, the default) or hash. */
export function skipExistingMode(raw: string): 'time' | 'hash' {
  if (raw === 'time' || raw === 'size-time') return 'time';
  if (raw === 'hash') return 'hash';
  throw new InvalidArgumentError(
    "It is 'time' (size and time, the default) or 'hash' (content). Write --skip-existing=hash, or put --skip-existing after the files and folders.",
  );
}

/** Runs `optmark mark` with checked options; returns the exit status. */
export async function runMark(opts: MarkOptions): Promise<number> {
  // Loaded here, not at the top: `optmark mark --help` and the other commands do not pay for them.
  const [{ laneInit, runCommand }, { errnoText }, { argumentClaims }] = await Promise.all([
    import('../batch/command.js'),
    import('../batch/files.js'),
    import('../batch/sources.js'),
  ]);
  let config = loadConfig();
  const applied = ['opt-out field'];
  if (opts.fingerprint) applied.unshift('fingerprint');
  let outDir: string | undefined;
  if (opts.out !== undefined) {
    try {
      makeDirs(opts.out);
      outDir = realpathSync.native(opts.out);
    } catch (err) {
      process.stderr.write(`optmark: cannot create the --out folder ${opts.out}: ${dirErrorReason(err)}\n`);
      return 1;
    }
  }
  if (opts.provenance) {
    // The key is checked (and created on first use) here, once: a bad key is one clear error, not one per file.
    const { loadSigningKey } = await import('../provenance/index.js');
    try {
      const key = await loadSigningKey({ dataDir: config.dataDir, file: config.signingKeyFile });
      applied.push(`provenance (key ${key.keyId})`);
    } catch (err) {
      if (!(err instanceof Error)) throw err;
      process.stderr.write(`optmark mark: ${err.message}\n`);
      return 1;
    }
  }
  const signals = await signalLayers(opts, config, applied);
  const ready = await readyForBatch(config, { fingerprint: opts.fingerprint, c2pa: true });
  if (typeof ready === 'string') {
    process.stderr.write(`optmark mark: ${ready}\n`);
    return 1;
  }
  config = ready;
  let keep: import('./mark-vault.js').VaultKeep | undefined;
  if (opts.vault !== undefined) {
    const [{ openVaultKeep }, { MAX_FILE_BYTES }] = await Promise.all([import('./mark-vault.js'), import('../batch/command.js')]);
    const opened = await openVaultKeep(config, opts.vault, MAX_FILE_BYTES);
    if (typeof opened === 'string') {
      process.stderr.write(`optmark mark: ${opened}\n`);
      return 1;
    }
    keep = opened;
    applied.push(`vault of ${keep.account}`);
  }
  // Two arguments can name files that land on one name below --out (a/x.jpg and b/x.jpg, or two folders
  // holding sub/x.jpg): the file an earlier-found argument claims keeps the name, every other is refused,
  // never written over it. Asked of the file system (a stat per folder argument), so nothing grows with
  // the run; one argument cannot collide with itself.
  const claimant =
    outDir !== undefined && opts.filesFrom === undefined && opts.inputs.length > 1 ? argumentClaims(opts.inputs, { skipDir: outDir }) : undefined;
  const plan = (found: Found): FileJob | FileOutcome => {
    if (opts.inPlace) {
      let real = found.real;
      if (real === '') {
        try {
          real = realpathSync.native(found.source);
        } catch (err) {
          return { input: found.input, output: null, format: null, bytes: null, status: 'failed', code: 'read_failed', message: errnoText(err) };
        }
      }
      // In place, the real path is replaced: renaming over a symbolic link would replace the link instead.
      return { input: found.input, source: found.source, target: real, inPlace: true };
    }
    const natural = join(outDir!, found.rel);
    if (found.real !== '' && natural === found.real) {
      return {
        input: found.input,
        output: natural,
        format: null,
        bytes: null,
        status: 'failed',
        code: 'output_is_input',
        message: `output ${natural} is an input; use another --out folder or --in-place`,
      };
    }
    const other = claimant?.(found.rel);
    if (other !== undefined && realOf(other) !== (found.real || realOf(found.source))) {
      return {
        input: found.input,
        output: natural,
        format: null,
        bytes: null,
        status: 'failed',
        code: 'output_collision',
        message: `output ${natural} would also be written for ${other}`,
      };
    }
    return { input: found.input, source: found.source, outDir, rel: found.rel };
  };
  // What happened to files with Content Credentials (refused ones are failures, named below).
  const credentials: Record<Exclude<CredentialsOutcome, 'none'>, number> = { updated: 0, 'parent-invalid': 0, unverified: 0, invalidated: 0, unchanged: 0 };
  let summary;
  try {
    summary = await runCommand({
      around: keep?.around,
      verb: 'marking',
      inputs: opts.inputs,
      filesFrom: opts.filesFrom,
      nul: opts.nul,
      jobs: opts.jobs,
      report: opts.report,
      skipDir: outDir,
      setup: {
        command: 'mark',
        init: laneInit(config),
        provenance: opts.provenance,
        fingerprint: opts.fingerprint,
        signals,
        hash: opts.report !== undefined,
        skipExisting: opts.skipExisting,
        keepTime: true,
        fsync: opts.fsync,
        skipFingerprint: false,
      },
      plan,
      onOutcome(o) {
        if (o.credentials !== undefined && o.credentials !== 'none') credentials[o.credentials]++;
      },
    });
  } catch (err) {
    // The layers' keys and secrets fail here (before any file), with a message that says what to do; a
    // list or report file that cannot be opened goes to the command line's one-line file message.
    if (!(err instanceof Error) || err.name === 'UsageError' || fileErrorReason((err as NodeJS.ErrnoException).code) !== undefined) throw err;
    process.stderr.write(`optmark mark: ${err.message}\n`);
    return 1;
  } finally {
    await keep?.close();
  }
  const { tally } = summary;
  const out = opts.report === '-' ? process.stderr : process.stdout;
  const lines = [
    `done ${tally.counts.done}, skipped ${tally.counts.skipped}, failed ${tally.counts.failed} (${applied.join(', ')})`,
    ...(Object.values(credentials).some((n) => n > 0) ? [`Content Credentials: ${credentialCounts(credentials)} (OPTMARK_C2PA=${config.c2paMode})`] : []),
    ...(keep ? [keep.summary()] : []),
    ...tally.details(summary.reportHint),
  ];
  out.write(`${lines.join('\n')}\n`);
  return summary.exitCode;
}

/** The signal layers asked for (undefined: none), named in `applied` in the order they are applied. */
async function signalLayers(opts: MarkOptions, config: ReturnType<typeof loadConfig>, applied: string[]) {
  if (!opts.tdmrep && !opts.contentCredentials) return undefined;
  let tdmPolicy = config.tdmPolicy;
  if (opts.tdmPolicy !== undefined) {
    const { checkPolicyUrl, PolicyUrlError } = await import('../signals/site.js');
    try {
      tdmPolicy = checkPolicyUrl(opts.tdmPolicy);
    } catch (err) {
      throw err instanceof PolicyUrlError ? new UsageError(`mark: ${err.message.replace('--policy', '--tdm-policy')}`) : err;
    }
  }
  if (opts.tdmrep) applied.splice(applied.indexOf('opt-out field') + 1, 0, `TDMRep${tdmPolicy ? ` (policy ${tdmPolicy})` : ''}`);
  if (opts.contentCredentials) applied.push('Content Credentials');
  return { tdmrep: opts.tdmrep, tdmPolicy, contentCredentials: opts.contentCredentials, training: config.c2paTrainingMining };
}

interface MarkFlags {
  out?: string;
  inPlace?: boolean;
  provenance?: boolean;
  fingerprint?: boolean;
  tdmrep?: boolean;
  tdmPolicy?: string;
  contentCredentials?: boolean;
  filesFrom?: string;
  null?: boolean;
  jobs?: number;
  skipExisting?: 'time' | 'hash' | true;
  report?: string;
  fsync?: boolean;
  vault?: string;
}

/** Registers `optmark mark` on the command line. */
export function register(program: Command): void {
  program
    .command('mark')
    .summary('mark files and folders with the opt-out field and optional layers (provenance, fingerprint)')
    .description(
      'Write the IPTC/PLUS opt-out field (plus:DataMining = DMI-PROHIBITED-AIMLTRAINING) into every JPEG, PNG and WebP file given, ' +
        'found in the folders (recursively) or listed (--files-from). Container bytes only: the pixels are untouched unless --fingerprint.',
    )
    .usage('<file-or-folder>... (--out <dir> | --in-place) [options]\n       optmark mark --files-from <list|-> (--out <dir> | --in-place) [options]')
    .argument('[inputs...]', 'files and folders (folders are walked recursively)')
    .option(
      '--out <dir>',
      "write results under <dir>, keeping each file's path below its input folder (a listed path: as listed); outputs get their input's modification time",
    )
    .option('--in-place', 'replace the input files instead (atomically; nothing else overwrites an input)')
    .option('--provenance', "add a provenance tag signed with this server's key (docs/provenance.md)")
    .option('--fingerprint', 'embed the experimental in-pixel fingerprint first (decodes and re-encodes the pixels)')
    .option('--tdmrep', 'also write the W3C TDMRep reservation (tdm:reservation 1, tdm:policy from OPTMARK_TDM_POLICY) into the XMP (docs/signals.md)')
    .option('--tdm-policy <url>', 'the tdm:policy URL for --tdmrep (instead of OPTMARK_TDM_POLICY)')
    .option(
      '--content-credentials',
      "give files without Content Credentials a new C2PA manifest signed with this server's C2PA identity, stating no AI training or mining (cawg.training-mining); files with credentials get the update manifest (OPTMARK_C2PA)",
    )
    .option('--files-from <list>', "read the paths from a file, or from standard input with '-', one a line")
    .option('-0, --null', 'the --files-from list is NUL-separated (find -print0)')
    .option(
      '-j, --jobs <n>',
      `files worked on at once: the main thread and worker threads (default: one per CPU, here ${availableParallelism()})`,
      positiveWholeNumber,
    )
    .addOption(
      new Option(
        '--skip-existing [how]',
        "leave outputs already up to date alone: by size and time (an output carrying its input's modification time), or with =hash by content",
      ).argParser(skipExistingMode),
    )
    .option(
      '--report <file.jsonl>',
      "one JSON line per file as it finishes: input, output, format, bytes, sha256 of the output, status, code, message ('-': standard output)",
    )
    .option('--fsync', 'flush each output to disk before it gets its name (slower; survives a power cut)')
    .option(
      '--vault <account>',
      "keep each original and its marked file in the account's Private Vault (its vault must be on; docs/vault.md); a file the vault refuses is marked and counted failed",
    )
    .addHelpText(
      'after',
      '\nExit status: 0 every file marked or skipped, 1 some failed, 2 usage error, 130 interrupted (Ctrl-C finishes the files under way,\n' +
        'leaves no partial or temporary file and says how far it got). docs/batch.md has the details and the measurements.\n',
    )
    .action(async (inputs: string[], o: MarkFlags) => {
      const opts = checkMarkOptions({
        inputs,
        out: o.out,
        inPlace: o.inPlace === true,
        provenance: o.provenance === true,
        fingerprint: o.fingerprint === true,
        tdmrep: o.tdmrep === true,
        tdmPolicy: o.tdmPolicy,
        contentCredentials: o.contentCredentials === true,
        filesFrom: o.filesFrom,
        nul: o.null === true,
        jobs: o.jobs,
        skipExisting: o.skipExisting === true ? 'time' : o.skipExisting,
        report: o.report,
        fsync: o.fsync === true,
        vault: o.vault,
      });
      exitWith(await runMark(opts));
    });
}

/** `3 updated, 0 invalidated, 1 unchanged`, with the outcomes that need a word of their own only when they occurred. */
function credentialCounts(c: Record<Exclude<CredentialsOutcome, 'none'>, number>): string {
  const rare = [
    c['parent-invalid'] > 0 ? `${c['parent-invalid']} updated over credentials that did not validate` : '',
    c.unverified > 0 ? `${c.unverified} unverified offline` : '',
  ].filter(Boolean);
  return [`${c.updated} updated`, ...rare, `${c.invalidated} invalidated`, `${c.unchanged} unchanged`].join(', ');
}

/** The real path of a file, or the path itself when it cannot be resolved (then it names no other file). */
function realOf(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}
