/** The server secret the key tile is derived from: 32 random bytes in a 0600 file, created on first use. */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { loadOrCreateKeyFile, readKeyFile } from '../secrets/files.js';

export const SECRET_BYTES = 32;
export const SECRET_FILE_NAME = 'fingerprint.key';
/** A secret file is 32 bytes; a file far larger is not one and is not read. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * Loads (or creates on first use, mode 0600) the secret: `file` if given, else `${dataDir}/fingerprint.key`.
 * Every worker thread loads it at warm-up, all at once on a fresh data directory: the file appears whole or
 * not at all, and the first one linked into place wins (src/secrets/files.ts).
 */
export async function loadFingerprintSecret(opts: { dataDir: string; file?: string | undefined }): Promise<Uint8Array> {
  const path = opts.file ?? join(opts.dataDir, SECRET_FILE_NAME);
  const tooLarge = (size: number) => new Error(`fingerprint secret file ${path} is ${size} bytes, too large for a secret`);
  const parse = (buf: Buffer): Uint8Array => {
    if (buf.length < 16) throw new Error(`fingerprint secret file ${path} is too short (${buf.length} bytes, need at least 16)`);
    return new Uint8Array(buf);
  };
  if (opts.file !== undefined) {
    const named = await readKeyFile(path, MAX_SECRET_FILE_BYTES, tooLarge);
    if (named === undefined) throw new Error(`fingerprint secret file ${path} does not exist`);
    return parse(named);
  }
  return loadOrCreateKeyFile(path, {
    parse,
    max: MAX_SECRET_FILE_BYTES,
    tooLarge,
    make: async () => {
      const secret = randomBytes(SECRET_BYTES);
      return { value: new Uint8Array(secret), bytes: secret };
    },
  });
}
