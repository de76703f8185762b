/** The server secret the key tile is derived from: 32 random bytes in a 0600 file, created on first use. */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export const SECRET_BYTES = 32;
export const SECRET_FILE_NAME = 'fingerprint.key';

/** Loads (or creates on first use, mode 0600) the secret: `file` if given, else `${dataDir}/fingerprint.key`. */
export async function loadFingerprintSecret(opts: { dataDir: string; file?: string | undefined }): Promise<Uint8Array> {
  const path = opts.file ?? join(opts.dataDir, SECRET_FILE_NAME);
  const existing = await readSecret(path);
  if (existing) return existing;
  if (opts.file !== undefined) throw new Error(`fingerprint secret file ${path} does not exist`);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const secret = randomBytes(SECRET_BYTES);
  try {
    // 'wx' fails if another process created it meanwhile; then that one's secret wins.
    const fh = await open(path, 'wx', 0o600);
    try {
      await fh.writeFile(secret);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await chmod(path, 0o600);
    return new Uint8Array(secret);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const raced = await readSecret(path);
    if (!raced) throw err;
    return raced;
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
