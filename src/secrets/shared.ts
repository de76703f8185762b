/**
 * The secrets every instance must share when they share a PostgreSQL store (docs/scaling.md):
 *
 * - The fingerprint key. Unless the operator names a file (OPTMARK_FINGERPRINT_SECRET_FILE: then every
 *   instance must be given the same file), the store holds it: the first instance seeds it with its data
 *   directory's fingerprint.key when it has one (marks made before the move stay detectable), else with
 *   32 random bytes; every instance writes the store's value to `fingerprint-shared.key` (0600) in its
 *   data directory and its workers embed and detect with that file.
 * - The provenance public keys (src/provenance/shared.ts). Private signing keys stay the operator's files.
 *
 * With the SQLite store nothing changes: the data directory is the one place for both.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { SECRET_BYTES, SECRET_FILE_NAME } from '../fingerprint/secret.js';
import { readKeyFile, writeKeyFile } from './files.js';
import type { Store } from '../store/index.js';

export const SHARED_FINGERPRINT_FILE = 'fingerprint-shared.key';
/** The fingerprint key's name among the store's secrets. */
export const FINGERPRINT_SECRET = 'fingerprint';
/** A key file far larger than a key is not one: not read. */
const MAX_KEY_BYTES = 64 * 1024;

const readIfThere = (path: string): Promise<Buffer | undefined> =>
  readKeyFile(path, MAX_KEY_BYTES, (size) => new Error(`${path} is ${size} bytes, too large for a key file`));

/** The data directory's own fingerprint key (the SQLite deployment's), when it has a usable one. */
export async function localFingerprintKey(dataDir: string): Promise<Buffer | undefined> {
  const local = await readIfThere(join(dataDir, SECRET_FILE_NAME));
  return local && local.length >= 16 ? local : undefined;
}

/** The configuration with the fingerprint secret every instance shares (unchanged for SQLite or a configured file). */
export async function withSharedSecrets(config: Config, store: Store): Promise<Config> {
  if (!store.sharesSecrets || config.fingerprintSecretFile !== undefined) return config;
  const local = await localFingerprintKey(config.dataDir);
  const secret = await store.sharedSecret(FINGERPRINT_SECRET, () => local ?? randomBytes(SECRET_BYTES));
  const file = join(config.dataDir, SHARED_FINGERPRINT_FILE);
  // Rewritten (atomically, 0600) only when the store's value differs from the file's.
  if (!(await readIfThere(file))?.equals(secret)) await writeKeyFile(file, secret, { how: 'replace' });
  return { ...config, fingerprintSecretFile: file };
}
