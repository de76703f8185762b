/**
 * One file of a batch, as a lane runs it (the main thread or a batch worker, given paths, never bytes):
 * read it whole into the lane's buffer, mark it with the engine the API uses (or verify it with the
 * API's verify report), write the result atomically. Only what the chosen layers need is loaded: the
 * opt-out path touches neither the decoder (sharp) nor the fingerprint, and loads no worker pool.
 */
import type { Stats } from 'node:fs';
import { SKIP_FINGERPRINT_HINT, toErrorShape } from '../errors.js';
import { extname, join, parse } from 'node:path';
import { imageDataWarnings, TRUNCATED_IMAGE_DATA, type Warning } from '../formats/complete.js';
import type { CredentialsOutcome } from '../c2pa/modes.js';
import type { CredentialsPolicy } from '../pipeline/credentials.js';
import { detectFormat, type ContainerFormat } from '../formats/index.js';
import { protect, read, type ProtectResult } from '../marking/engine.js';
import type { Layers } from '../pipeline/layers.js';
import type { WorkerInit } from '../pool/tasks.js';
import type { VerifyReport } from '../pipeline/verify.js';
import type { SigningKey } from '../provenance/index.js';
import type { SignalLayers } from '../signals/layers.js';
import { closeSync, readSync } from 'node:fs';
import { filesAddon, type FilesAddon } from '../native/index.js';
import { imageDataOffset } from '../formats/jpeg.js';
import { hasManifestStore } from '../c2pa/detect.js';
import {
  errnoText,
  FileError,
  openSource,
  type OutputPart,
  ReadBuffer,
  readIfFile,
  sha256Of,
  type Source,
  statFile,
  upToDate,
  writeAtomically,
  writeAtomicallyCopying,
} from './files.js';

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

/** A file marked in memory: its pieces, and what the report says of it. */
interface Produced {
  pieces: Uint8Array[];
  changed: boolean;
  warnings: Warning[];
  credentials: CredentialsOutcome;
}

/** Lazily loaded layer machinery, per lane. */
export class Lane {
  readonly #setup: LaneSetup;
  readonly #buffer = new ReadBuffer();
  #second: ReadBuffer | undefined;
  readonly #last2 = Buffer.alloc(2);
  #signingKey: Promise<SigningKey> | undefined;
  #layers: Promise<Layers> | undefined;
  #markLayered: Promise<typeof import('../pipeline/mark.js')> | undefined;
  #verify: Promise<typeof import('../pipeline/verify.js')> | undefined;
  #liveLayers: Promise<import('../pipeline/layers-live.js').LiveLayers> | undefined;
  #policy: CredentialsPolicy | undefined;

  /** The in-kernel copy, on the quick way only (see `concurrent`). */
  readonly #copier: FilesAddon | undefined;

  constructor(setup: LaneSetup) {
    this.#setup = setup;
    // The quick way: the opt-out field alone (no signing, no pixels), where marking is a synchronous edit
    // of the bytes before the image data and the rest is copied file to file.
    this.#copier = setup.command === 'mark' && !setup.provenance && !setup.fingerprint && !setup.signals ? filesAddon() : undefined;
  }

  /**
   * True when this lane takes several files at once: their reads and edits run one after the other on
   * its thread, their copies at the same time on libuv's thread pool. Worker threads then do not pay:
   * the work left per file is a few system calls.
   */
  get concurrent(): boolean {
    return this.#copier !== undefined;
  }

  /** Loads what every file will need, so the first file does not pay for it (and a bad key fails once). */
  async prepare(): Promise<void> {
    if (this.#setup.command === 'verify') {
      await Promise.all([this.#verifier(), this.#verifyLayers()]);
    } else {
      if (this.#setup.provenance) await this.#key();
      if (this.#setup.fingerprint) await Promise.all([this.#layered(), this.#live(this.#setup.init)]);
    }
  }

  async run(job: FileJob): Promise<FileOutcome> {
    return this.#setup.command === 'mark' ? this.#mark(job) : this.#verifyFile(job);
  }

  async #mark(job: FileJob): Promise<FileOutcome> {
    const s = this.#setup;
    let source: Source;
    try {
      source = openSource(job.source, s.init.maxUploadBytes);
    } catch (err) {
      return readFailure({ input: job.input, output: null }, err);
    }
    try {
      return await this.#markOpened(job, source);
    } finally {
      closeSync(source.fd);
    }
  }

  async #markOpened(job: FileJob, source: Source): Promise<FileOutcome> {
    const s = this.#setup;
    const init = s.init;
    const { stats } = source;
    const copier = this.#copier;
    // The quick way reads a JPEG's first bytes only (its metadata) and copies the rest file to file;
    // a hash of the output (--report, --skip-existing=hash) needs every byte in memory.
    const needsAll = !copier || s.hash || s.skipExisting === 'hash';
    let bytes: Buffer;
    try {
      bytes = needsAll ? this.#buffer.readAll(source) : this.#readForMetadata(source, 'copied');
    } catch (err) {
      return readFailure({ input: job.input, output: null }, err);
    }
    const format = detectFormat(bytes);
    if (!format)
      return {
        input: job.input,
        output: null,
        format: null,
        bytes: null,
        status: 'skipped',
        code: 'unsupported_format',
        message: 'not a JPEG, PNG or WebP image',
      };
    let target = job.target;
    if (target === undefined) {
      const name = outputName(job.rel!, format);
      target = join(job.outDir!, name);
      if (name !== job.rel) return { input: job.input, output: target, format: format.name, bytes: null, status: 'rename', code: null };
    }
    const base = { input: job.input, output: target };
    let existing: Stats | undefined;
    if (s.skipExisting === 'time' && !job.inPlace) {
      existing = statFile(target);
      if (upToDate(stats, existing)) {
        return {
          ...base,
          format: format.name,
          bytes: existing!.size,
          sha256: null,
          status: 'skipped',
          code: 'up_to_date',
          message: 'output up to date (size and time)',
        };
      }
    }
    // Content Credentials (a C2PA manifest store) are kept, refused or invalidated as the API does
    // (OPTMARK_C2PA); their update manifest is built over the whole file (a WebP read for the quick way
    // may have left its bitstream unread: #readWebp).
    const store = carriesStore(format.name, bytes);
    if (store && (bytes.length < stats.size || (!needsAll && format.name === 'webp'))) {
      try {
        bytes = this.#buffer.readAll(source);
      } catch (err) {
        return readFailure(base, err);
      }
    }
    let result: Produced;
    try {
      if (store) {
        // Its own memory: other files of the quick way reuse the read buffer while this one awaits.
        bytes = Buffer.from(bytes);
        result = await this.#produceWithCredentials(bytes);
      } else if (copier) {
        // Synchronous on the quick way: the read buffer is not reused before its pieces are written.
        const whole = bytes.length === stats.size;
        const r = protect(bytes, { warnings: whole });
        result = { pieces: r.pieces, changed: r.changed, warnings: whole ? r.warnings : this.#cutWarnings(source, bytes.length), credentials: 'none' };
      } else result = await this.#produce(bytes);
    } catch (err) {
      const shape = toErrorShape(err);
      const detail = shape.code === 'internal_error' && err instanceof Error ? `: ${err.message}` : '';
      return { ...base, format: format.name, bytes: null, status: 'failed', code: shape.code, message: `${shape.message}${detail}` };
    }
    let size = stats.size - bytes.length;
    for (const p of result.pieces) size += p.length;
    const sha256 = s.hash || s.skipExisting === 'hash' ? sha256Of(result.pieces) : null;
    const done = (status: Status, code: string | null, message?: string): FileOutcome => ({
      ...base,
      format: format.name,
      bytes: size,
      sha256,
      status,
      changed: result.changed,
      code,
      ...(message ? { message } : {}),
      credentials: result.credentials,
      warnings: result.warnings,
    });
    if (job.inPlace && !result.changed) return done('done', null); // already carries the field exactly: nothing to write
    if (s.skipExisting === 'hash' && !job.inPlace) {
      // No output yet (or unreadable): it is written.
      const old = readIfFile((this.#second ??= new ReadBuffer()), target, init.maxUploadBytes + (8 << 20));
      if (old && old.length === size && sha256Of([old]) === sha256) return done('skipped', 'up_to_date', 'output up to date (same content)');
    }
    const options = {
      mode: job.inPlace ? stats.mode & 0o7777 : undefined,
      mtimeMs: s.keepTime && !job.inPlace ? stats.mtimeMs : undefined,
      fsync: s.fsync,
    };
    try {
      if (copier) await writeAtomicallyCopying(target, outputParts(result.pieces, bytes, stats.size), source.fd, copier, options);
      else await writeAtomically(target, result.pieces, options);
    } catch (err) {
      if (err instanceof FileError) return { ...base, format: format.name, bytes: null, sha256: null, status: 'failed', code: err.code, message: err.message };
      return {
        ...base,
        format: format.name,
        bytes: null,
        sha256: null,
        status: 'failed',
        code: `${(err as { syscall?: string }).syscall === 'read' ? 'read' : 'write'}_${errCode(err)}`,
        message: `writing ${target}: ${errnoText(err)}`,
      };
    }
    return done('done', null);
  }

  /** The marked file as pieces (views of the read buffer and new segments), for a file without Content Credentials. */
  async #produce(input: Buffer): Promise<Produced> {
    const s = this.#setup;
    // The pixel and signal layers: the same layer path as the dashboard's (pipeline/mark.ts), whose
    // input must own its memory (the read buffer is reused).
    if (s.fingerprint || s.signals) return this.#produceWithCredentials(Buffer.from(input));
    let result: ProtectResult;
    if (s.provenance) {
      const { protectSigned } = await import('../provenance/index.js');
      result = await protectSigned(input, await this.#key());
    } else {
      result = protect(input);
    }
    return { pieces: result.pieces, changed: result.changed, warnings: result.warnings, credentials: 'none' };
  }

  /**
   * A file carrying Content Credentials (its whole bytes, its own memory), marked by the code the API
   * runs: protect's (src/pipeline/credentials.ts), or the layer path's with --provenance, --fingerprint
   * or a signal layer (src/pipeline/mark.ts; also files without). `refuse` throws content_credentials_present.
   */
  async #produceWithCredentials(input: Buffer): Promise<Produced> {
    const s = this.#setup;
    const policy = (this.#policy ??= (await import('../pipeline/credentials.js')).credentialsPolicy(s.init.c2paMode, {
      dataDir: s.init.dataDir,
      certFile: s.init.c2paCertFile,
      keyFile: s.init.c2paKeyFile,
    }));
    if (s.fingerprint || s.provenance || s.signals) {
      const [{ runMark }, ctx] = await Promise.all([
        this.#layered(),
        s.fingerprint
          ? this.#live(s.init)
          : { maxPixels: s.init.maxPixels, signingKey: () => this.#key(), fingerprintSecret: () => Promise.reject(new Error('no fingerprint layer')) },
      ]);
      const r = await runMark(input, { provenance: s.provenance, fingerprint: s.fingerprint, signals: s.signals }, ctx, policy);
      const credentials = r.credentials ?? 'none';
      return { pieces: [r.bytes], changed: credentials !== 'unchanged', warnings: r.warnings ?? [], credentials };
    }
    const { protectWithCredentials } = await import('../pipeline/credentials.js');
    const r = await protectWithCredentials(input, {}, policy);
    return { pieces: r.pieces, changed: r.outcome !== 'unchanged', warnings: r.warnings, credentials: r.outcome };
  }

  /**
   * protect's warnings about a JPEG marked from its first bytes: none when its end marker is there (its
   * last bytes), else those of the whole file, read for that (a file cut off in its image data).
   */
  #cutWarnings(source: Source, headLength: number): Warning[] {
    if (this.#endsWithEoi(source.fd, source.stats.size, headLength)) return [];
    return imageDataWarnings('jpeg', (this.#second ??= new ReadBuffer()).readAll(source));
  }

  async #verifyFile(job: FileJob): Promise<FileOutcome> {
    let source: Source;
    try {
      source = openSource(job.source, this.#setup.init.maxUploadBytes);
    } catch (err) {
      return readFailure({ input: job.input }, err);
    }
    try {
      return await this.#verifyOpened(job, source);
    } finally {
      closeSync(source.fd);
    }
  }

  async #verifyOpened(job: FileJob, source: Source): Promise<FileOutcome> {
    const s = this.#setup;
    const base = { input: job.input };
    const size = source.stats.size;
    // Without the detector and without the hash, only the metadata is needed: a JPEG's segments before
    // its image data are in its first bytes (the scan after them is never looked at by read()).
    const metadataOnly = s.skipFingerprint && !s.hash;
    if (metadataOnly) {
      let head: Buffer;
      try {
        head = this.#readForMetadata(source);
      } catch (err) {
        return readFailure(base, err);
      }
      const format = detectFormat(head);
      if (!format) return { ...base, format: null, bytes: size, status: 'skipped', code: 'unsupported_format', message: 'not a JPEG, PNG or WebP image' };
      if (head.length === size) {
        try {
          return { ...base, format: format.name, bytes: size, sha256: null, status: 'done', code: null, report: await this.#metadataReport(head) };
        } catch (err) {
          return verifyFailure(base, format.name, size, err);
        }
      }
      // A JPEG's head (every segment before its image data) answers when the file carries no Content
      // Credentials (their validation hashes the whole file) and when its end marker (EOI), which says
      // whether the file is whole, is found in its last bytes.
      if (!carriesStore('jpeg', head) && this.#endsWithEoi(source.fd, size, head.length)) {
        try {
          const report = await this.#metadataReport(head);
          // The head alone ends without EOI: the warning is about the cut, not the file (whose end has one).
          report.warnings = report.warnings.filter((w) => w.code !== TRUNCATED_IMAGE_DATA);
          // A provenance tag's digest covers the whole file: then it is read whole (below).
          if (!report.provenance.present) return { ...base, format: format.name, bytes: size, sha256: null, status: 'done', code: null, report };
        } catch {
          // read whole (below): the whole file gives the answer and the error
        }
      }
    }
    let bytes: Buffer;
    try {
      bytes = this.#buffer.readAll(source);
    } catch (err) {
      return readFailure(base, err);
    }
    const format = detectFormat(bytes);
    if (!format) return { ...base, format: null, bytes: bytes.length, status: 'skipped', code: 'unsupported_format', message: 'not a JPEG, PNG or WebP image' };
    try {
      if (metadataOnly)
        return { ...base, format: format.name, bytes: bytes.length, sha256: null, status: 'done', code: null, report: await this.#metadataReport(bytes) };
      const { verifyReport } = await this.#verifier();
      const { sha256, ...report } = await verifyReport(bytes, await this.#verifyLayers());
      return { ...base, format: format.name, bytes: bytes.length, sha256, status: 'done', code: null, report };
    } catch (err) {
      return verifyFailure(base, format.name, bytes.length, err);
    }
  }

  /**
   * What the metadata of an opened file needs read: a JPEG's first FIRST_HEAD_BYTES, or HEAD_BYTES, when
   * they hold every segment before its image data (the head: shorter than the file, ending inside its
   * scan); else the whole file (PNG, WebP, a JPEG whose segments go on). A file that is none of the three
   * formats: its first bytes only, enough to say so.
   */
  #readForMetadata(source: Source, webpBitstream: 'read' | 'copied' = 'read'): Buffer {
    const size = source.stats.size;
    if (size <= FIRST_HEAD_BYTES) return this.#buffer.readAll(source);
    for (const length of [FIRST_HEAD_BYTES, HEAD_BYTES]) {
      if (length >= size) break;
      const head = this.#buffer.readStart(source, length);
      const format = detectFormat(head);
      if (!format) return head;
      if (format.name === 'webp' && webpBitstream === 'copied') return this.#readWebp(source, head.length);
      if (format.name !== 'jpeg') break;
      if (imageDataOffset(head) !== undefined) return head;
    }
    return this.#buffer.readAll(source);
  }

  /**
   * A WebP as long as the file, every byte read at its offset but the bitstream of its long `VP8 ` or
   * `VP8L` chunks past their first bytes (protect reads their headers alone), left as the buffer held
   * it: the pieces holding such a stretch are longer than COPY_MIN_BYTES, so outputParts copies them
   * file to file and those bytes are never written from memory. The first `headLength` bytes are already
   * read. A chunk walk that goes wrong reads the file whole (protect then says what is wrong).
   */
  #readWebp(source: Source, headLength: number): Buffer {
    const size = source.stats.size;
    const buffer = this.#buffer;
    let filled = buffer.reserve(size) ? 0 : headLength;
    // Reads on to `to`, and at least READ_AHEAD_BYTES more (so many small chunks cost few reads).
    const need = (to: number): void => {
      if (to <= filled) return;
      const upTo = Math.min(size, Math.max(to, filled + READ_AHEAD_BYTES));
      buffer.readAt(source.fd, filled, upTo);
      filled = upTo;
    };
    need(12);
    const bytes = buffer.view(size);
    const riffEnd = 8 + bytes.readUInt32LE(4);
    if (riffEnd > size) return buffer.readAll(source);
    for (let pos = 12; pos < riffEnd; ) {
      if (pos + 8 > riffEnd) return buffer.readAll(source);
      need(pos + 8);
      const length = bytes.readUInt32LE(pos + 4);
      if (pos + 8 + length > riffEnd) return buffer.readAll(source);
      const end = Math.min(pos + 8 + length + (length & 1), riffEnd);
      const fourcc = bytes.toString('latin1', pos, pos + 4);
      if ((fourcc === 'VP8 ' || fourcc === 'VP8L') && length >= COPY_MIN_BYTES + BITSTREAM_HEADER_BYTES) {
        need(pos + 8 + BITSTREAM_HEADER_BYTES);
        filled = Math.max(filled, end); // the rest of its payload is left unread
      } else need(end);
      pos = end;
    }
    need(size);
    // As readAll: a file that grew since its fstat is refused (its copies would not reach its end).
    buffer.checkEnd(source);
    return bytes;
  }

  /**
   * True when the file's last bytes hold a JPEG end marker (FF D9) past the head (so not a thumbnail's in
   * the metadata); false sends the file to a whole read, which tells a cut file from a whole one. The
   * last two bytes first (where a whole JPEG has it), then the last TAIL_BYTES.
   */
  #endsWithEoi(fd: number, size: number, headLength: number): boolean {
    try {
      if (size - 2 >= headLength && readSync(fd, this.#last2, 0, 2, size - 2) === 2 && this.#last2.equals(EOI)) return true;
      const from = Math.max(0, size - TAIL_BYTES);
      const tail = (this.#second ??= new ReadBuffer()).readRange(fd, from, Math.min(TAIL_BYTES, size));
      const at = tail.lastIndexOf(EOI);
      return at >= 0 && from + at >= headLength;
    } catch {
      return false;
    }
  }

  /** verifyReport's fields without the file's hash and with the fingerprint not examined (the same read and provenance check). */
  async #metadataReport(bytes: Uint8Array): Promise<Omit<VerifyReport, 'sha256'>> {
    const reading = read(bytes); // typed errors for unsupported or damaged containers, as verifyReport
    const [layers, { otherDeclarations }] = await Promise.all([this.#verifyLayers(), this.#verifier()]);
    const [provenance, fingerprint, others] = await Promise.all([
      layers.verifyProvenance(bytes),
      layers.detectFingerprint(bytes),
      otherDeclarations(reading, bytes),
    ]);
    return { optedOut: reading.optedOut, signals: reading.signals, provenance, fingerprint, ...others };
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

  #layered(): Promise<typeof import('../pipeline/mark.js')> {
    return (this.#markLayered ??= import('../pipeline/mark.js'));
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
        async verifyProvenance(input: Uint8Array) {
          const r = await verifyProvenance(input, keyring);
          return { present: r.present, valid: r.valid, verifiable: r.verifiable };
        },
        detectFingerprint: async () => ({ ...NOT_FOUND_FINGERPRINT }),
      };
    })());
  }
}

/**
 * What a metadata-only verify or a quick mark reads of a JPEG first: most JPEGs' segments before the image
 * data fit in a few KiB (a camera's, with its thumbnail, in tens); then HEAD_BYTES, then the whole file.
 */
const FIRST_HEAD_BYTES = 16 * 1024;
const HEAD_BYTES = 64 * 1024;
/** Stretches of the input at least this long are copied file to file rather than written from memory. */
const COPY_MIN_BYTES = 64 * 1024;
/** What a WebP read leaves of a long bitstream chunk's payload: its header (frame tag, dimensions). */
const BITSTREAM_HEADER_BYTES = 32;
const READ_AHEAD_BYTES = 16 * 1024;

/**
 * The output as parts: protect's pieces, those that are long stretches of the input read (`bytes`, the
 * file from its start) as file ranges; a file read in part ends with one range from its last piece's
 * start to the end of the file.
 */
function outputParts(pieces: readonly Uint8Array[], bytes: Uint8Array, fileSize: number): OutputPart[] {
  const parts: OutputPart[] = [];
  const tail = bytes.length < fileSize;
  for (let i = 0; i < pieces.length; i++) {
    const p = pieces[i]!;
    const from = p.byteOffset - bytes.byteOffset;
    const inInput = p.buffer === bytes.buffer && from >= 0 && from + p.length <= bytes.length;
    const last = i === pieces.length - 1;
    const reachesEnd = inInput && from + p.length === bytes.length;
    // A JPEG marked from its first bytes ends with the start of its image data, which runs on in the file.
    if (last && tail && !reachesEnd) throw new Error('marking from the first bytes: the output does not end with the rest of the input');
    // The last piece of a file marked from its first bytes (the start of a JPEG's image data) goes with the
    // rest, file to file, however short: those bytes were read, but need not be written from memory.
    if (inInput && (p.length >= COPY_MIN_BYTES || (last && tail))) {
      const toEnd = last && reachesEnd;
      parts.push({ from, length: toEnd ? fileSize - from : p.length, toEnd });
    } else parts.push(p);
  }
  return parts;
}
/** ...and its last bytes, for the end marker (after it come at most trailers such as MPF images, ending in one too). */
const TAIL_BYTES = 64 * 1024;
const EOI = Buffer.from([0xff, 0xd9]);

/**
 * hasManifestStore, where a walk that throws (too many segments) counts as a store: the file then goes
 * the whole way the API's goes, which answers that error.
 */
function carriesStore(format: ContainerFormat['name'], bytes: Uint8Array): boolean {
  try {
    return hasManifestStore(format, bytes);
  } catch {
    return true;
  }
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
