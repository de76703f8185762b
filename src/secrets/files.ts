/**
 * Every key and secret file optmark reads or writes goes through here: the provenance signing keys
 * (src/provenance/keys.ts), the fingerprint secret (src/fingerprint/secret.ts), the C2PA identity
 * (src/c2pa/identity.ts), the secret the instances share (src/secrets/shared.ts) and the start-up key
 * (src/main.ts). One writer: a fresh temporary file beside the target (exclusive create, mode 0600 unless
 * the file is public, fsynced), then linked into place (create: never replaces, the first of racing
 * processes wins) or renamed over it (replace), then the directory fsynced. A reader never sees half a
 * file, a crash never leaves a truncated key, and the mode never depends on the umask.
 */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { threadId } from 'node:worker_threads';

/** Mode of a private key or secret file. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of a public key or certificate written beside them. */
export const PUBLIC_FILE_MODE = 0o644;
/** Mode of the directories that hold them. */
export const PRIVATE_DIR_MODE = 0o700;

export const isErrno = (err: unknown, code: string): boolean => (err as NodeJS.ErrnoException | undefined)?.code === code;

/** A small file's bytes, undefined when it does not exist; a file over `max` bytes throws `tooLarge(size)` unread. */
export async function readKeyFile(path: string, max: number, tooLarge: (size: number) => Error): Promise<Buffer | undefined> {
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
  try {
    const st = await fh.stat();
    // Reading a directory fails with an EISDIR that names no path: say which one.
    if (st.isDirectory()) throw Object.assign(new Error(`${path} is a directory, not a file`), { code: 'EISDIR', path, syscall: 'read' });
    if (st.size > max) throw tooLarge(st.size);
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export interface WriteKeyOptions {
  /** `create` (default) never replaces an existing file; `replace` swaps it atomically. */
  how?: 'create' | 'replace';
  /** PRIVATE_FILE_MODE (default) or PUBLIC_FILE_MODE. */
  mode?: number;
}

/**
 * Writes `data` to `path` atomically (temporary file, fsync, link or rename, directory fsync), creating
 * the directory (0700) when missing. Resolves to false when `how` is `create` and the file exists
 * already (another process got there first: its content stands).
 */
export async function writeKeyFile(path: string, data: string | Uint8Array, options: WriteKeyOptions = {}): Promise<boolean> {
  const mode = options.mode ?? PRIVATE_FILE_MODE;
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const tmp = `${path}.${process.pid}.${threadId}.${randomBytes(4).toString('hex')}.tmp`;
  const fh = await open(tmp, 'wx', mode);
  try {
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    // open's mode passes through the umask; the file's mode must not.
    await chmod(tmp, mode);
    if (options.how === 'replace') await rename(tmp, path);
    else {
      try {
        await link(tmp, path);
      } catch (err) {
        if (isErrno(err, 'EEXIST')) return false;
        throw err;
      }
    }
    await syncDir(dir);
    return true;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

export interface CreateOnce<T> {
  /** The file's content as the value, or a throw when it is not one. */
  parse(bytes: Buffer): T;
  /** A fresh value and the bytes that store it. */
  make(): Promise<{ value: T; bytes: string | Uint8Array }>;
  /** The largest file `parse` is given; larger ones throw `tooLarge(size)`. */
  max: number;
  tooLarge(size: number): Error;
}

/**
 * The value stored in `path`, created there when missing. Processes and worker threads that race on a
 * fresh data directory all get the one that was linked first.
 */
export async function loadOrCreateKeyFile<T>(path: string, how: CreateOnce<T>): Promise<T> {
  const existing = await readKeyFile(path, how.max, how.tooLarge);
  if (existing !== undefined) return how.parse(existing);
  const fresh = await how.make();
  if (await writeKeyFile(path, fresh.bytes)) return fresh.value;
  const raced = await readKeyFile(path, how.max, how.tooLarge);
  if (raced === undefined) throw Object.assign(new Error(`${path} vanished while it was being created`), { code: 'ENOENT', path });
  return how.parse(raced);
}
