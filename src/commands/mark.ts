/**
 * `optmark mark <file-or-folder>... (--out <dir> | --in-place) [--provenance] [--fingerprint]`: the
 * opt-out field and the chosen layers on many files, in parallel on the worker pool (the same `mark`
 * task the dashboard will use). Folders are walked recursively and their relative paths kept under
 * --out; files that are not JPEG, PNG or WebP (sniffed from their bytes) are skipped with a reason.
 * An input is never overwritten unless --in-place is given. Progress goes to stderr when it is a
 * terminal, the summary to stdout; the exit status is 1 when any file failed.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readdir, readFile, realpath, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, parse, relative, resolve } from 'node:path';
import { loadConfig, type Config } from '../config.js';
import { loadFingerprintSecret } from '../fingerprint/index.js';
import { detectFormat, type ContainerFormat } from '../formats/index.js';
import { ImagePool, workerInitFrom } from '../pool/pool.js';
import { loadSigningKey } from '../provenance/index.js';
import type { MarkTask } from '../pipeline/tasks.js';
import type { Command } from 'commander';
import { parseCommandArgs, UsageError } from './args.js';

const HELP = `usage: optmark mark <file-or-folder>... (--out <dir> | --in-place) [--provenance] [--fingerprint]

  Writes the IPTC/PLUS opt-out field (plus:DataMining = DMI-PROHIBITED-AIMLTRAINING) into every
  JPEG, PNG and WebP file given or found in the folders (recursively), on the worker pool.

  --out <dir>      write results under <dir>, keeping each file's path relative to its input folder
  --in-place       replace the input files instead (atomically; nothing else overwrites an input)
  --provenance     add a provenance tag signed with this server's key (docs/provenance.md)
  --fingerprint    embed the experimental in-pixel fingerprint first (re-encodes the pixels)
`;

/** Leading bytes read to sniff a file's format (WebP needs 12). */
const SNIFF_BYTES = 16;
/** The progress line is redrawn at most this often. */
const PROGRESS_INTERVAL_MS = 100;
/** Extensions kept as they are because they already name the produced format. */
const KNOWN_EXTENSIONS: Record<ContainerFormat['name'], readonly string[]> = {
  jpeg: ['.jpg', '.jpeg', '.jpe', '.jfif'],
  png: ['.png'],
  webp: ['.webp'],
};

interface Options {
  inputs: string[];
  out: string | undefined;
  inPlace: boolean;
  provenance: boolean;
  fingerprint: boolean;
}

/** One input file found, before it is looked at. */
interface Found {
  /** The path as the operator would write it (input argument joined with the relative path). */
  display: string;
  source: string;
  /** Path relative to its input folder (the base name for a file given directly). */
  rel: string;
}

/** A file that will be marked. */
interface Job extends Found {
  target: string;
  /** Mode to give the output (in place: the input's), else the default. */
  mode: number | undefined;
}

type Status = 'done' | 'skipped' | 'failed';

interface Outcome {
  display: string;
  status: Status;
  reason?: string;
}

function parseOptions(args: string[]): Options | undefined {
  const { values, positionals } = parseCommandArgs('mark', args, {
    out: { type: 'string' },
    'in-place': { type: 'boolean' },
    provenance: { type: 'boolean' },
    fingerprint: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return undefined;
  if (positionals.length === 0) throw new UsageError(`mark: give at least one file or folder\n\n${HELP}`);
  const inPlace = values['in-place'] === true;
  if (inPlace && values.out !== undefined) throw new UsageError('mark: --out and --in-place exclude each other');
  if (!inPlace && values.out === undefined) throw new UsageError('mark: --out <dir> is required (or --in-place to replace the inputs)');
  return { inputs: positionals, out: values.out, inPlace, provenance: values.provenance === true, fingerprint: values.fingerprint === true };
}

const errnoText = (err: unknown): string => {
  const e = err as NodeJS.ErrnoException;
  return e.code === 'ENOENT' ? 'no such file or folder' : e.code === 'EACCES' ? 'permission denied' : (e.message ?? String(err));
};

/** Every file under the inputs, in argument order then sorted path order; problems become outcomes. */
async function findFiles(inputs: string[], skipDir: string | undefined, outcomes: Outcome[]): Promise<Found[]> {
  const found: Found[] = [];
  const walk = async (dir: string, root: string, arg: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      outcomes.push({ display: join(arg, relative(root, dir)), status: 'failed', reason: errnoText(err) });
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = join(dir, e.name);
      const display = join(arg, relative(root, path));
      if (e.isDirectory()) {
        if (skipDir !== undefined && (await realpath(path).catch(() => path)) === skipDir) continue; // --out inside an input
        await walk(path, root, arg);
      } else if (e.isFile()) {
        found.push({ display, source: path, rel: relative(root, path) });
      } else if (e.isSymbolicLink()) {
        // Links to files are followed; links to folders are not (they can form cycles).
        const st = await stat(path).catch(() => undefined);
        if (st?.isFile()) found.push({ display, source: path, rel: relative(root, path) });
        else outcomes.push({ display, status: 'skipped', reason: st ? 'symbolic link to a folder (not followed)' : 'broken symbolic link' });
      } else {
        outcomes.push({ display, status: 'skipped', reason: 'not a regular file' });
      }
    }
  };
  for (const arg of inputs) {
    let st;
    try {
      st = await stat(arg);
    } catch (err) {
      outcomes.push({ display: arg, status: 'failed', reason: errnoText(err) });
      continue;
    }
    if (st.isDirectory()) await walk(resolve(arg), resolve(arg), arg);
    else if (st.isFile()) found.push({ display: arg, source: resolve(arg), rel: basename(arg) });
    else outcomes.push({ display: arg, status: 'skipped', reason: 'not a regular file' });
  }
  return found;
}

async function sniff(path: string): Promise<ContainerFormat | undefined> {
  const fh = await open(path, 'r');
  try {
    const head = new Uint8Array(SNIFF_BYTES);
    const { bytesRead } = await fh.read(head, 0, SNIFF_BYTES, 0);
    return detectFormat(head.subarray(0, bytesRead));
  } finally {
    await fh.close();
  }
}

/** The output name: the input's when its extension names the format, else the base name plus the format's. */
function outputName(rel: string, format: ContainerFormat): string {
  const ext = extname(rel).toLowerCase();
  if (KNOWN_EXTENSIONS[format.name].includes(ext)) return rel;
  const p = parse(rel);
  return join(p.dir, `${p.name}.${format.extension}`);
}

/**
 * Decides what happens to each found file: sniffed format, size, output path. Refuses (as failures)
 * outputs that would overwrite an input or that two inputs would both write.
 */
async function plan(found: Found[], opts: Options, outDir: string | undefined, maxBytes: number, outcomes: Outcome[]): Promise<Job[]> {
  const real = new Map<string, Found>();
  const unique: Array<Found & { real: string }> = [];
  for (const f of found) {
    const r = await realpath(f.source).catch(() => f.source);
    if (real.has(r)) {
      outcomes.push({ display: f.display, status: 'skipped', reason: `same file as ${real.get(r)!.display}` });
      continue;
    }
    real.set(r, f);
    unique.push({ ...f, real: r });
  }
  const jobs: Job[] = [];
  const targets = new Map<string, string>();
  for (const f of unique) {
    let format: ContainerFormat | undefined;
    let size: number;
    let mode: number;
    try {
      [format, { size, mode }] = await Promise.all([sniff(f.source), stat(f.source)]);
    } catch (err) {
      outcomes.push({ display: f.display, status: 'failed', reason: errnoText(err) });
      continue;
    }
    if (!format) {
      outcomes.push({ display: f.display, status: 'skipped', reason: 'not a JPEG, PNG or WebP image' });
      continue;
    }
    if (size > maxBytes) {
      outcomes.push({ display: f.display, status: 'failed', reason: `${size} bytes, over the ${maxBytes}-byte limit (OPTMARK_MAX_UPLOAD_BYTES)` });
      continue;
    }
    // In place, the real path is replaced: renaming over a symbolic link would replace the link instead.
    const target = opts.inPlace ? f.real : join(outDir!, outputName(f.rel, format));
    if (!opts.inPlace && real.has(target)) {
      outcomes.push({ display: f.display, status: 'failed', reason: `output ${target} is an input; use another --out folder or --in-place` });
      continue;
    }
    const other = targets.get(target);
    if (other !== undefined) {
      outcomes.push({ display: f.display, status: 'failed', reason: `output ${target} would also be written for ${other}` });
      continue;
    }
    targets.set(target, f.display);
    jobs.push({ ...f, target, mode: opts.inPlace ? mode & 0o7777 : undefined });
  }
  return jobs;
}

/** Writes beside the target, then renames over it: a reader (or a crash) never sees half a file. */
async function writeAtomically(target: string, bytes: Uint8Array, mode: number | undefined): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, bytes, { flag: 'wx' });
    if (mode !== undefined) await chmod(tmp, mode); // exactly the input's mode, not masked by the umask
    await rename(tmp, target);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** A buffer that owns its whole ArrayBuffer, so moving it to a worker detaches nothing else. */
function owned(buf: Buffer): Uint8Array {
  if (buf.byteOffset === 0 && buf.byteLength === buf.buffer.byteLength) return buf;
  const copy = new Uint8Array(buf.byteLength);
  copy.set(buf);
  return copy;
}

async function markOne(pool: ImagePool, job: Job, opts: Options): Promise<Outcome> {
  let input: Uint8Array;
  try {
    input = owned(await readFile(job.source));
  } catch (err) {
    return { display: job.display, status: 'failed', reason: errnoText(err) };
  }
  const task: MarkTask = { kind: 'mark', input, provenance: opts.provenance, fingerprint: opts.fingerprint };
  let result;
  try {
    result = await pool.run(task);
  } catch (err) {
    return { display: job.display, status: 'failed', reason: err instanceof Error ? err.message : String(err) };
  }
  if (!result.ok) {
    // For an unexpected failure the worker's first detail line says more than "something went wrong".
    const detail = result.detail?.split('\n')[0];
    return { display: job.display, status: 'failed', reason: `${detail ?? result.error.message} (${result.error.code})` };
  }
  if (result.kind !== 'marked') return { display: job.display, status: 'failed', reason: `unexpected worker result ${result.kind}` };
  try {
    await writeAtomically(job.target, result.bytes, job.mode);
  } catch (err) {
    return { display: job.display, status: 'failed', reason: `writing ${job.target}: ${errnoText(err)}` };
  }
  return { display: job.display, status: 'done' };
}

/** A one-line progress bar on a terminal; nothing at all otherwise. */
class Progress {
  readonly #stream: NodeJS.WriteStream | undefined;
  readonly #total: number;
  #finished = 0;
  #failed = 0;
  #drawnAt = 0;

  constructor(total: number, stream: NodeJS.WriteStream) {
    this.#stream = stream.isTTY && total > 0 ? stream : undefined;
    this.#total = total;
  }

  add(outcome: Outcome): void {
    this.#finished++;
    if (outcome.status === 'failed') this.#failed++;
    const now = Date.now();
    if (this.#finished === this.#total || now - this.#drawnAt >= PROGRESS_INTERVAL_MS) {
      this.#drawnAt = now;
      this.#draw();
    }
  }

  #draw(): void {
    if (!this.#stream) return;
    const width = 30;
    const filled = Math.round((this.#finished / this.#total) * width);
    const failed = this.#failed > 0 ? `  ${this.#failed} failed` : '';
    this.#stream.write(`\r\x1b[2Kmarking [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.#finished}/${this.#total}${failed}`);
  }

  end(): void {
    this.#stream?.write('\r\x1b[2K');
  }
}

/** Runs `fn` over the items with at most `lanes` at once. */
async function inLanes<T>(items: readonly T[], lanes: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane));
}

/** Loads the keys the chosen layers need in this process first, so a bad key is one clear error, not one per file. */
async function prepareLayers(config: Config, opts: Options): Promise<string[]> {
  const applied = ['opt-out field'];
  if (opts.fingerprint) {
    await loadFingerprintSecret({ dataDir: config.dataDir, file: config.fingerprintSecretFile });
    applied.unshift('fingerprint');
  }
  if (opts.provenance) {
    const key = await loadSigningKey({ dataDir: config.dataDir, file: config.signingKeyFile });
    applied.push(`provenance (key ${key.keyId})`);
  }
  return applied;
}

function summary(outcomes: Outcome[], applied: string[]): string {
  const count = (s: Status): number => outcomes.filter((o) => o.status === s).length;
  const lines = [`done ${count('done')}, skipped ${count('skipped')}, failed ${count('failed')} (${applied.join(', ')})`];
  for (const status of ['skipped', 'failed'] as const) {
    for (const o of outcomes) if (o.status === status) lines.push(`${status.padEnd(7)}  ${o.display}: ${o.reason ?? ''}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Marks the jobs on a worker pool no larger than the work, recording an outcome for each. */
async function markAll(jobs: Job[], config: Config, opts: Options, outcomes: Outcome[]): Promise<void> {
  if (jobs.length === 0) return;
  const size = Math.min(config.poolSize, jobs.length);
  const progress = new Progress(jobs.length, process.stderr);
  const pool = new ImagePool({
    size,
    // One task per lane, so nothing waits in the queue and the per-task deadline measures work only.
    queueLength: size,
    taskTimeoutMs: config.taskTimeoutMs,
    init: workerInitFrom(config),
  });
  try {
    await inLanes(jobs, size, async (job) => {
      const outcome = await markOne(pool, job, opts);
      outcomes.push(outcome);
      progress.add(outcome);
    });
  } finally {
    progress.end();
    await pool.close();
  }
}

/** Entry point of `optmark mark`. */
export async function main(args: string[]): Promise<number> {
  const opts = parseOptions(args);
  if (!opts) {
    process.stdout.write(HELP);
    return 0;
  }
  const config = loadConfig();
  let applied: string[];
  try {
    applied = await prepareLayers(config, opts);
  } catch (err) {
    // SigningKeyError, or the fingerprint secret's file errors: one line, no stack.
    if (!(err instanceof Error)) throw err;
    process.stderr.write(`optmark mark: ${err.message}\n`);
    return 1;
  }
  let outDir: string | undefined;
  if (opts.out !== undefined) {
    try {
      await mkdir(opts.out, { recursive: true });
      outDir = await realpath(opts.out);
    } catch (err) {
      process.stderr.write(`optmark mark: --out ${opts.out}: ${errnoText(err)}\n`);
      return 1;
    }
  }
  const outcomes: Outcome[] = [];
  const found = await findFiles(opts.inputs, outDir, outcomes);
  const jobs = await plan(found, opts, outDir, config.maxUploadBytes, outcomes);

  await markAll(jobs, config, opts, outcomes);
  process.stdout.write(summary(outcomes, applied));
  return outcomes.some((o) => o.status === 'failed') ? 1 : 0;
}

/**
 * Registers `optmark mark` on the command line. mark still parses its own options (--help included) with
 * parseOptions above, so commander hands it every argument as it came.
 */
export function register(program: Command): void {
  program
    .command('mark')
    .summary('mark files and folders with the opt-out field and optional layers (provenance, fingerprint)')
    .usage('<file-or-folder>... (--out <dir> | --in-place) [--provenance] [--fingerprint]')
    .description('Mark files and folders with the opt-out field; `optmark mark --help` lists the options.')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[args...]')
    .action(async (args: string[]) => {
      process.exitCode = await main(args);
    });
}
