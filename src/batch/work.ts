/**
 * One file of a batch, as a lane runs it (the main thread or a batch worker, given paths, never bytes):
 * its structure read from the file (image-file.ts), marked or verified by the pipeline's own functions
 * (src/pipeline/mark.ts runMark, src/pipeline/verify.ts: what the API and the dashboard run), the result
 * written atomically. Only what the chosen layers need is loaded: the opt-out path touches neither the
 * decoder (sharp) nor the fingerprint, and loads no worker pool.
 */
import { closeSync } from 'node:fs';
import { extname, join, parse } from 'node:path';
import type { CredentialsOutcome } from '../c2pa/modes.js';
import { SKIP_FINGERPRINT_HINT, toErrorShape } from '../errors.js';
import type { Warning } from '../formats/complete.js';
import type { ContainerFormat, ParsedImage } from '../formats/index.js';
import type { CredentialsPolicy } from '../pipeline/credentials.js';
import type { Layers } from '../pipeline/layers.js';
import type { MarkContext, MarkedFile } from '../pipeline/mark.js';
import type { VerifyReport } from '../pipeline/verify.js';
import type { WorkerInit } from '../pool/tasks.js';
import type { SigningKey } from '../provenance/index.js';
import type { SignalLayers } from '../signals/layers.js';
import { errnoText, FileError, openSource, ReadBuffer, readIfFile, sha256Of, type Source, statFile, upToDate, writeAtomically } from './files.js';
import { readHead, readWhole, sniff } from './image-file.js';

/** What a lane is told once, when it starts. */
export interface LaneSetup {
  command: 'mark' | 'verify';
  init: WorkerInit;
  /** mark: the layers to add. */
  provenance: boolean;
  fingerprint: boolean;
  /** mark: TDMRep and Content Credentials (src/signals/layers.ts), on the layer path. */
  signals?: SignalLayers | undefined;
  /** mark: compute the output's SHA-256 (for --report); verify: the file's (the API's sha256 field). */
  hash: boolean;
  /** mark: 'time' (size and time) or 'hash' (content); undefined writes every output. */
  skipExisting: 'time' | 'hash' | undefined;
  /** mark: give outputs their input's modification time (--out), so --skip-existing can tell. */
  keepTime: boolean;
  fsync: boolean;
  /** verify: leave the pixel detector out (`blocks: 0`), as POST /api/v1/verify?fingerprint=skip. */
  skipFingerprint: boolean;
}

/** One file to do. */
export interface FileJob {
  /** The path as the operator gave or would write it (reports and messages). */
  input: string;
  /** The path to open. */
  source: string;
  /** mark: where the result goes (in place: the real path of the input), when already decided. */
  target?: string | undefined;
  /**
   * mark --out: the output folder and the input's path relative to it; the lane names the output from
   * the sniffed format. An output whose name would change (a wrong or missing extension) comes back
   * as status 'rename' for the main thread to check against the other outputs, then is sent again with
   * its target.
   */
  outDir?: string | undefined;
  rel?: string | undefined;
  /** mark --in-place: the file is replaced, so an unchanged file is not written at all. */
  inPlace?: boolean;
}

export type Status = 'done' | 'skipped' | 'failed';

/** Extensions kept as they are because they already name the produced format. */
const KNOWN_EXTENSIONS: Record<ContainerFormat['name'], readonly string[]> = {
  jpeg: ['.jpg', '.jpeg', '.jpe', '.jfif'],
  png: ['.png'],
  webp: ['.webp'],
};

/** The output name: the input's when its extension names the format, else the base name plus the format's. */
export function outputName(rel: string, format: ContainerFormat): string {
  const ext = extname(rel).toLowerCase();
  if (KNOWN_EXTENSIONS[format.name].includes(ext)) return rel;
  const p = parse(rel);
  return join(p.dir, `${p.name}.${format.extension}`);
}

/** One line of the report (JSON Lines), in the order files finish. */
export interface FileOutcome {
  input: string;
  output?: string | null;
  format: string | null;
  /** mark: bytes of the output; verify: bytes of the file. */
  bytes: number | null;
  /** mark: SHA-256 of the output (with --report); verify: of the file, as the API reports it. */
  sha256?: string | null;
  /** 'rename' only between a lane and the main thread (see FileJob.outDir), never in a report. */
  status: Status | 'rename';
  /** mark: false when the file already carried the field exactly (copied or, in place, left alone). */
  changed?: boolean;
  /** A stable code for skipped and failed files (the API's error codes, or the reason's). */
  code: string | null;
  message?: string;
  /** mark: what happened to the file's Content Credentials (the API's Optmark-Content-Credentials value). */
  credentials?: CredentialsOutcome;
  /** mark: the warnings protect's answer has for the file (a cut file, Content Credentials). */
  warnings?: Warning[];
  /** verify: the API's verify report fields. */
  report?: Omit<VerifyReport, 'sha256'>;
}

/**
 * Lazily loaded layer machinery, per lane. A lane does one file at a time: it reads the file whole into
 * its buffer (verify without the detector: the metadata alone, image-file.ts readHead) and writes the
 * output from memory. That is the plain way and the only one: a quick way that read a JPEG's metadata
 * alone and copied the rest file to file in the kernel, eight files in flight on the main thread, measured
 * no faster on a folder (bench/RESULTS.md), so it went.
 */
export class Lane {
  readonly #setup: LaneSetup;
  readonly #buffer = new ReadBuffer();
  #second: ReadBuffer | undefined;
  #signingKey: Promise<SigningKey> | undefined;
  #layers: Promise<Layers> | undefined;
  #marking: Promise<typeof import('../pipeline/mark.js')> | undefined;
  #verify: Promise<typeof import('../pipeline/verify.js')> | undefined;
  #liveLayers: Promise<import('../pipeline/layers-live.js').LiveLayers> | undefined;
  #policy: CredentialsPolicy | undefined;

  constructor(setup: LaneSetup) {
    this.#setup = setup;
  }

  /** Loads what every file will need, so the first file does not pay for it (and a bad key fails once). */
  async prepare(): Promise<void> {
    if (this.#setup.command === 'verify') {
      await Promise.all([this.#verifier(), this.#verifyLayers()]);
    } else {
      await this.#marker();
      if (this.#setup.provenance) await this.#key();
      if (this.#setup.fingerprint) await this.#live(this.#setup.init);
    }
  }

  async run(job: FileJob): Promise<FileOutcome> {
    const base = this.#setup.command === 'mark' ? { input: job.input, output: null } : { input: job.input };
    let source: Source;
    try {
      source = openSource(job.source, this.#setup.init.maxUploadBytes);
    } catch (err) {
      return readFailure(base, err);
    }
    const buffer = this.#buffer;
    try {
      return this.#setup.command === 'mark' ? await this.#mark(job, source, buffer) : await this.#verifyFile(job, source, buffer);
    } finally {
      closeSync(source.fd);
    }
  }

  async #mark(job: FileJob, source: Source, buffer: ReadBuffer): Promise<FileOutcome> {
    const s = this.#setup;
    const { stats } = source;
    let format: ContainerFormat | undefined;
    try {
      format = sniff(buffer, source);
    } catch (err) {
      return readFailure({ input: job.input, output: null }, err);
    }
    if (!format) return { input: job.input, output: null, format: null, bytes: null, ...UNSUPPORTED };
    let target = job.target;
    if (target === undefined) {
      const name = outputName(job.rel!, format);
      target = join(job.outDir!, name);
      if (name !== job.rel) return { input: job.input, output: target, format: format.name, bytes: null, status: 'rename', code: null };
    }
    const base = { input: job.input, output: target, format: format.name };
    if (s.skipExisting === 'time' && !job.inPlace) {
      const existing = statFile(target);
      if (upToDate(stats, existing)) {
        return { ...base, bytes: existing!.size, sha256: null, status: 'skipped', code: 'up_to_date', message: 'output up to date (size and time)' };
      }
    }
    const hashed = s.hash || s.skipExisting === 'hash';
    let marked: MarkedFile;
    try {
      // Content Credentials are kept, refused or invalidated as the API does (OPTMARK_C2PA).
      const image = readWhole(buffer, source);
      const [{ runMark }, ctx] = await Promise.all([this.#marker(), this.#context()]);
      marked = await runMark(image, { provenance: s.provenance, fingerprint: s.fingerprint, signals: s.signals }, ctx, this.#credentials());
    } catch (err) {
      if (err instanceof FileError || (err as { syscall?: string }).syscall !== undefined) return readFailure(base, err);
      return { ...base, bytes: null, ...failure(err) };
    }
    let size = 0;
    for (const p of marked.pieces) size += p.length;
    const sha256 = hashed ? sha256Of(marked.pieces) : null;
    const done = (status: Status, code: string | null, message?: string): FileOutcome => ({
      ...base,
      bytes: size,
      sha256,
      status,
      changed: marked.changed,
      code,
      ...(message ? { message } : {}),
      credentials: marked.credentials ?? 'none',
      warnings: marked.answerWarnings,
    });
    if (job.inPlace && !marked.changed) return done('done', null); // already carries the field exactly: nothing to write
    if (s.skipExisting === 'hash' && !job.inPlace) {
      // No output yet (or unreadable): it is written.
      const old = readIfFile((this.#second ??= new ReadBuffer()), target, s.init.maxUploadBytes + (8 << 20));
      if (old && old.length === size && sha256Of([old]) === sha256) return done('skipped', 'up_to_date', 'output up to date (same content)');
    }
    const options = {
      mode: job.inPlace ? stats.mode & 0o7777 : undefined,
      mtimeMs: s.keepTime && !job.inPlace ? stats.mtimeMs : undefined,
      fsync: s.fsync,
    };
    try {
      writeAtomically(target, marked.pieces, options);
    } catch (err) {
      const code = err instanceof FileError ? err.code : `${(err as { syscall?: string }).syscall === 'read' ? 'read' : 'write'}_${errCode(err)}`;
      const message = err instanceof FileError ? err.message : `writing ${target}: ${errnoText(err)}`;
      return { ...base, bytes: null, sha256: null, status: 'failed', code, message };
    }
    return done('done', null);
  }

  async #verifyFile(job: FileJob, source: Source, buffer: ReadBuffer): Promise<FileOutcome> {
    const s = this.#setup;
    const base = { input: job.input };
    const size = source.stats.size;
    let format: ContainerFormat | undefined;
    try {
      format = sniff(buffer, source);
    } catch (err) {
      return readFailure(base, err);
    }
    if (!format) return { ...base, format: null, bytes: size, ...UNSUPPORTED };
    // Without the detector and without the hash, the metadata alone answers: the file's structure read
    // without its image data, unless it carries Content Credentials (their validation hashes the whole
    // file) or a provenance tag (its digest covers the whole file): those are read whole.
    const metadataOnly = s.skipFingerprint && !s.hash;
    try {
      const [verify, layers] = await Promise.all([this.#verifier(), this.#verifyLayers()]);
      if (metadataOnly) {
        const head = readHead(buffer, source);
        if (!head.manifestStore) {
          const report = await verify.reportOf(head, layers);
          if (!report.provenance.present) return { ...base, format: format.name, bytes: size, sha256: null, status: 'done', code: null, report };
        }
        const report = await verify.reportOf(readWhole(buffer, source), layers);
        return { ...base, format: format.name, bytes: size, sha256: null, status: 'done', code: null, report };
      }
      const { sha256, ...report } = await verify.verifyReport(readWhole(buffer, source), layers);
      return { ...base, format: format.name, bytes: size, sha256, status: 'done', code: null, report };
    } catch (err) {
      if (err instanceof FileError || (err as { syscall?: string }).syscall !== undefined) return readFailure(base, err);
      return verifyFailure(base, format.name, size, err);
    }
  }

  /**
   * What verify reports for bytes already in memory (a scan's image from a clone, an archive or a
   * fetch): the same verifyReport over the same layers as a file's. Throws the pipeline's coded errors.
   */
  async verifyBytes(bytes: Uint8Array): Promise<VerifyReport> {
    const [verify, layers] = await Promise.all([this.#verifier(), this.#verifyLayers()]);
    return verify.verifyReport(bytes, layers);
  }

  /** The credentials policy (OPTMARK_C2PA); its signer and certificate library are loaded on the first file that carries credentials. */
  #credentials(): CredentialsPolicy {
    if (this.#policy) return this.#policy;
    const init = this.#setup.init;
    let loaded: Promise<CredentialsPolicy> | undefined;
    const policy = (): Promise<CredentialsPolicy> =>
      (loaded ??= import('../pipeline/credentials.js').then(({ credentialsPolicy }) =>
        credentialsPolicy(init.c2paMode, { dataDir: init.dataDir, certFile: init.c2paCertFile, keyFile: init.c2paKeyFile }),
      ));
    return (this.#policy = { mode: init.c2paMode ?? 'update', identity: async () => (await policy()).identity() });
  }

  /** What the layers need: the worker's live layers with the fingerprint, else the signing key alone. */
  #context(): MarkContext | Promise<MarkContext> {
    const s = this.#setup;
    if (s.fingerprint) return this.#live(s.init);
    return { maxPixels: s.init.maxPixels, signingKey: () => this.#key(), fingerprintSecret: () => Promise.reject(new Error('no fingerprint layer')) };
  }

  #key(): Promise<SigningKey> {
    return (this.#signingKey ??= import('../provenance/index.js').then(({ loadSigningKey }) =>
      loadSigningKey({ dataDir: this.#setup.init.dataDir, file: this.#setup.init.signingKeyFile }),
    ));
  }

  #live(init: WorkerInit): Promise<import('../pipeline/layers-live.js').LiveLayers> {
    return (this.#liveLayers ??= import('../pipeline/layers-live.js').then(async ({ LiveLayers }) => {
      const live = new LiveLayers(init);
      await live.warm();
      return live;
    }));
  }

  #marker(): Promise<typeof import('../pipeline/mark.js')> {
    return (this.#marking ??= import('../pipeline/mark.js'));
  }

  #verifier(): Promise<typeof import('../pipeline/verify.js')> {
    return (this.#verify ??= import('../pipeline/verify.js'));
  }

  /**
   * The layers exactly as the API's workers run them (LiveLayers); without the detector, the same
   * provenance check beside a fingerprint "not examined" (no decoder loaded at all).
   */
  #verifyLayers(): Promise<Layers> {
    return (this.#layers ??= (async () => {
      const init = this.#setup.command === 'verify' && this.#setup.skipFingerprint ? { ...this.#setup.init, fingerprintDetect: false } : this.#setup.init;
      if (init.fingerprintDetect) return this.#live(init);
      const [{ Keyring, verifyProvenance }, { NOT_FOUND_FINGERPRINT }] = await Promise.all([import('../provenance/index.js'), import('../pipeline/layers.js')]);
      const keyring = await Keyring.open({ dataDir: init.dataDir, file: init.signingKeyFile });
      return {
        async verifyProvenance(input: Uint8Array | ParsedImage) {
          const r = await verifyProvenance(input, keyring);
          return { present: r.present, valid: r.valid, verifiable: r.verifiable };
        },
        detectFingerprint: async () => ({ ...NOT_FOUND_FINGERPRINT }),
      };
    })());
  }
}

const UNSUPPORTED = { status: 'skipped', code: 'unsupported_format', message: 'not a JPEG, PNG or WebP image' } as const;

/** A file the pipeline refused or failed on: its error code and message (an internal error's own message too). */
function failure(err: unknown): { status: 'failed'; code: string; message: string } {
  const shape = toErrorShape(err);
  const detail = shape.code === 'internal_error' && err instanceof Error ? `: ${err.message}` : '';
  return { status: 'failed', code: shape.code, message: `${shape.message}${detail}` };
}

function verifyFailure(base: { input: string }, format: string, size: number, err: unknown): FileOutcome {
  const shape = toErrorShape(err);
  let message = shape.message;
  if (shape.code === 'fingerprint_unavailable') {
    // The API's message advises ?fingerprint=skip; the command line says why and names its own option.
    const cause = (err as { cause?: unknown }).cause;
    message = `The fingerprint detector cannot run: its secret cannot be read (${cause === undefined ? 'unknown' : errnoText(cause)}); ${SKIP_FINGERPRINT_HINT}.`;
  }
  return { ...base, format, bytes: size, sha256: null, status: 'failed', code: shape.code, message };
}

function errCode(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' ? code.toLowerCase() : 'failed';
}

function readFailure(base: { input: string; output?: string | null }, err: unknown): FileOutcome {
  if (err instanceof FileError) {
    return { ...base, format: null, bytes: null, status: err.code === 'not_a_file' ? 'skipped' : 'failed', code: err.code, message: err.message };
  }
  return { ...base, format: null, bytes: null, status: 'failed', code: `read_${errCode(err)}`, message: errnoText(err) };
}
