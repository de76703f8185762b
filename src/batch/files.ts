/**
 * The file side of a batch: reads into one reused buffer, atomic writes from pieces with writev, and
 * the up-to-date test of --skip-existing. The calls (open, fstat, pread, writev, rename) are synchronous
 * on purpose: a synchronous call costs one system call where the promise API costs a thread-pool round
 * trip and a wake-up per call; lanes on worker threads do files side by side.
 */
import { createRequire } from 'node:module';
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  futimesSync,
  openSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writevSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { makeDirs } from '../datadir.js';

let cryptoModule: typeof import('node:crypto') | undefined;
/** node:crypto, loaded on first use (only --report and --skip-existing=hash hash outputs). */
const nodeCrypto = (): typeof import('node:crypto') => (cryptoModule ??= createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto'));

/** A read that failed for a reason the operator can act on (too large, changed while read). */
export class FileError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'FileError';
  }
}

/** errno codes as a sentence a person reads; the code itself goes to the report. */
export function errnoText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  switch (e.code) {
    case 'ENOENT':
      return 'no such file or folder';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a folder';
    case 'ENOSPC':
      return 'no space left on the device';
    case 'EROFS':
      return 'read-only file system';
    case 'EDQUOT':
      return 'disk quota exceeded';
    default:
      return e.message ?? String(err);
  }
}

/**
 * One lane's read buffer: grown to the largest file seen (never past the size limit) and reused, so a
 * folder of 12 MP JPEGs costs one allocation, not one per file. A read's bytes are valid until the next.
 */
export class ReadBuffer {
  #buf: Buffer = Buffer.allocUnsafeSlow(4 << 20);
  readonly #past = Buffer.alloc(1);

  /** The whole of an opened file (checked by openSource), refusing one that grew since its fstat. */
  readAll(source: Source): Buffer {
    // One byte more than the size: a file that grew since fstat shows it, and is refused.
    const want = source.stats.size + 1;
    const n = this.#fill(source.fd, 0, want, Math.min(this.#buf.length * 2, source.maxBytes + 1));
    if (n === want) throw grew();
    return this.#buf.subarray(0, n);
  }

  /**
   * Refuses an opened file that grew since its fstat (changed_while_read), as readAll does, for a file read
   * in pieces (readAt): one byte read at its size must find its end.
   */
  checkEnd(source: Source): void {
    if (readSync(source.fd, this.#past, 0, 1, source.stats.size) !== 0) throw grew();
  }

  /** The first `length` bytes of an opened file (fewer when it is shorter). */
  readStart(source: Source, length: number): Buffer {
    return this.readRange(source.fd, 0, Math.min(length, source.stats.size));
  }

  /** `length` bytes of an open file from `offset` (fewer at its end). */
  readRange(fd: number, offset: number, length: number): Buffer {
    return this.#buf.subarray(0, this.#fill(fd, offset, length, length));
  }

  /**
   * Room for a whole file of `size` bytes at its offsets (see readAt); true when the buffer had to grow,
   * which loses what it held.
   */
  reserve(size: number): boolean {
    if (this.#buf.length >= size) return false;
    this.#buf = Buffer.allocUnsafeSlow(size);
    return true;
  }

  /** Reads the file's bytes [from, to) into the same offsets of the buffer (reserved); a short read is changed_while_read. */
  readAt(fd: number, from: number, to: number): void {
    for (let n = from; n < to; ) {
      const r = readSync(fd, this.#buf, n, to - n, n);
      if (r === 0) throw new FileError('changed_while_read', 'the file shrank while it was read');
      n += r;
    }
  }

  /** The first `size` bytes of the buffer (after reserve and readAt). */
  view(size: number): Buffer {
    return this.#buf.subarray(0, size);
  }

  /** The whole file (opened, checked and closed here); see openSource and readAll. */
  read(path: string, maxBytes: number): { bytes: Buffer; stats: Stats } {
    const source = openSource(path, maxBytes);
    try {
      return { bytes: this.readAll(source), stats: source.stats };
    } finally {
      closeSync(source.fd);
    }
  }

  /** Reads up to `want` bytes from `offset` into the buffer (grown to at least `grow` when too small); returns how many. */
  #fill(fd: number, offset: number, want: number, grow: number): number {
    if (this.#buf.length < want) this.#buf = Buffer.allocUnsafeSlow(Math.max(want, grow));
    let n = 0;
    while (n < want) {
      const r = readSync(fd, this.#buf, n, want - n, offset + n);
      if (r === 0) break;
      n += r;
    }
    return n;
  }
}

const grew = (): FileError => new FileError('changed_while_read', 'the file grew while it was read');

/** An input opened for reading: a regular file within the size limit. Close it with closeSync(fd). */
export interface Source {
  fd: number;
  stats: Stats;
  maxBytes: number;
}

/** Opens `path` for reading; a folder or device is refused (not_a_file), a file over `maxBytes` too (limit_exceeded). */
export function openSource(path: string, maxBytes: number): Source {
  const fd = openSync(path, constants.O_RDONLY);
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new FileError('not_a_file', 'not a regular file');
    if (stats.size > maxBytes) throw new FileError('limit_exceeded', `${stats.size} bytes, over the ${maxBytes}-byte limit (OPTMARK_MAX_UPLOAD_BYTES)`);
    return { fd, stats, maxBytes };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** SHA-256 (hex) of the pieces in order. */
export function sha256Of(pieces: readonly Uint8Array[]): string {
  const hash = nodeCrypto().createHash('sha256');
  for (const p of pieces) hash.update(p);
  return hash.digest('hex');
}

export interface WriteOptions {
  /** File mode of the output (in place: the input's); else 0o666 less the umask. */
  mode?: number | undefined;
  /** Modification (and access) time to give the output, in ms since the epoch (--out: the input's). */
  mtimeMs?: number | undefined;
  /** fsync the file before the rename (--fsync): the output survives a power cut once it has its name. */
  fsync?: boolean;
}

/**
 * Folders this process already created or found. Bounded: a walk visits folders in order, so the
 * recent ones are the ones asked about again.
 */
const knownDirs = new Set<string>();
const KNOWN_DIRS_MAX = 1024;

function ensureDir(dir: string): void {
  if (knownDirs.has(dir)) return;
  makeDirs(dir);
  if (knownDirs.size >= KNOWN_DIRS_MAX) knownDirs.clear();
  knownDirs.add(dir);
}

/** Temporary files being written right now (for the interrupt handler: none is left behind). */
export const writing = new Set<string>();

/**
 * Name of the temporary file beside `target` (dot-prefixed, so globs and listings skip it): the process
 * id, a random tag drawn once per thread and a counter. (Not random bytes per file: OpenSSL asks the
 * kernel for the process id on every draw, and loading node:crypto costs start-up time.) It is opened with O_EXCL, so a clash fails, never overwrites.
 */
const pid = process.pid; // process.pid is a system call each time
const tag = Math.floor(Math.random() * 2 ** 32)
  .toString(16)
  .padStart(8, '0');
let tempCount = 0;

export function tempName(target: string): string {
  return join(dirname(target), `.${basename(target)}.${pid}.${tag}${(tempCount++).toString(36)}.tmp`);
}

/** Opens a new temporary file beside `target` (O_EXCL; a name taken by something else gets the next one). */
function openTemp(target: string, mode: number): { fd: number; tmp: string } {
  for (let attempt = 0; ; attempt++) {
    const tmp = tempName(target);
    try {
      return { fd: openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode), tmp };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 8) throw err;
    }
  }
}

/**
 * Writes `pieces` to a new temporary file beside `target` and renames it over the target: a reader, a
 * crash or an interrupt sees the old file or the whole new one, never half of one.
 */
export function writeAtomically(target: string, pieces: readonly Uint8Array[], options: WriteOptions = {}): void {
  ensureDir(dirname(target));
  // O_EXCL: never follows or reuses something already there.
  const { fd, tmp } = openTemp(target, options.mode ?? 0o666);
  writing.add(tmp);
  let renamed = false;
  try {
    try {
      writeAll(fd, pieces);
      if (options.mode !== undefined) fchmodSync(fd, options.mode); // exactly the input's mode, not masked by the umask
      if (options.mtimeMs !== undefined) futimesSync(fd, options.mtimeMs / 1000, options.mtimeMs / 1000);
      if (options.fsync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, target);
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        unlinkSync(tmp);
      } catch {
        // already gone
      }
    }
    writing.delete(tmp);
  }
}

/** writev until every byte is out (a large writev may return short). */
function writeAll(fd: number, pieces: readonly Uint8Array[]): void {
  let list = pieces.filter((p) => p.length > 0);
  while (list.length > 0) {
    // Linux takes at most IOV_MAX (1024) buffers per call.
    const batch = list.length > 1024 ? list.slice(0, 1024) : list;
    let written = writevSync(fd, batch as Uint8Array[]);
    let i = 0;
    while (i < batch.length && written >= batch[i]!.length) written -= batch[i++]!.length;
    const rest = list.slice(i);
    if (written > 0) rest[0] = rest[0]!.subarray(written);
    list = rest;
  }
}

/** Removes temporary files still being written (an interrupt that cannot wait for them). */
export function removeUnfinished(): void {
  for (const tmp of writing) {
    try {
      unlinkSync(tmp);
    } catch {
      // gone already
    }
  }
  writing.clear();
}

/** The target's stats, or undefined when there is nothing (or no regular file) there. */
export function statFile(path: string): Stats | undefined {
  try {
    const st = statSync(path);
    return st.isFile() ? st : undefined;
  } catch {
    return undefined;
  }
}

/** Times set from a double (futimes) come back within a microsecond of the input's. */
const MTIME_TOLERANCE_MS = 0.002;

/**
 * --skip-existing's quick test (size and time): an output is up to date when it is a non-empty regular
 * file carrying its input's modification time, which optmark gives every output it writes under --out
 * (as `cp -p` and `rsync -t` do). An input changed since (new time) or an output replaced by anything
 * else (its own time) is done again.
 */
export function upToDate(input: Stats, output: Stats | undefined): boolean {
  return output !== undefined && output.size > 0 && Math.abs(output.mtimeMs - input.mtimeMs) < MTIME_TOLERANCE_MS;
}

/** The output's bytes when it exists (for --skip-existing=hash), read through the lane's second buffer. */
export function readIfFile(buffer: ReadBuffer, path: string, maxBytes: number): Buffer | undefined {
  try {
    return buffer.read(path, maxBytes).bytes;
  } catch {
    return undefined;
  }
}
