/** The server secret the key tile is derived from: 32 random bytes in a 0600 file, created on first use. */
import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { threadId } from 'node:worker_threads';

export const SECRET_BYTES = 32;
export const SECRET_FILE_NAME = 'fingerprint.key';

/**
 * Loads (or creates on first use, mode 0600) the secret: `file` if given, else `${dataDir}/fingerprint.key`.
 * Every worker thread loads it at warm-up, all at once on a fresh data directory: the file appears whole or
 * not at all (written under a name of its own, then linked into place, which fails if another got there
 * first: then that one's secret wins). Created empty and then written, it was read empty in between.
 */
export async function loadFingerprintSecret(opts: { dataDir: string; file?: string | undefined }): Promise<Uint8Array> {
  const path = opts.file ?? join(opts.dataDir, SECRET_FILE_NAME);
  const existing = await readSecret(path);
  if (existing) return existing;
  if (opts.file !== undefined) throw new Error(`fingerprint secret file ${path} does not exist`);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const secret = randomBytes(SECRET_BYTES);
  const tmp = `${path}.${process.pid}.${threadId}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const fh = await open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(secret);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await chmod(tmp, 0o600);
    await link(tmp, path);
    return new Uint8Array(secret);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const raced = await readSecret(path);
    if (!raced) throw err;
    return raced;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

async function readSecret(path: string): Promise<Uint8Array | undefined> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (buf.length < 16) throw new Error(`fingerprint secret file ${path} is too short (${buf.length} bytes, need at least 16)`);
  return new Uint8Array(buf);
}
