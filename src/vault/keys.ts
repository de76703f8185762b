/**
 * The vault master key: 32 random bytes kept with the service's other secrets. On SQLite it is the data
 * directory's `vault-master.key` (mode 0600), made on first use; with PostgreSQL the store's shared
 * secret `vault-master`, so every instance seals and opens with the same key, and a 0600 copy is kept in
 * the data directory for backups. OPTMARK_VAULT_MASTER_KEY_FILE names a file of the operator's instead.
 * Rotation (docs/vault.md): the data keys are re-wrapped under a new master key; objects stay as stored.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { loadOrCreateKeyFile, readKeyFile, writeKeyFile } from '../secrets/files.js';
import type { Store } from '../store/index.js';
import { KEY_BYTES } from './crypto.js';

export const VAULT_MASTER_FILE = 'vault-master.key';
export const VAULT_MASTER_SECRET = 'vault-master';

const tooLarge = (path: string) => (size: number) => new Error(`${path} is ${size} bytes; a vault master key file holds ${KEY_BYTES}`);

function parse(path: string, bytes: Buffer): Buffer {
  if (bytes.length !== KEY_BYTES) throw new Error(`${path} holds ${bytes.length} bytes; a vault master key is ${KEY_BYTES} random bytes`);
  return bytes;
}

/** The master key: the operator's file, the store's shared secret (PostgreSQL), or the data directory's own. */
export async function vaultMasterKey(dataDir: string, store: Store, file?: string): Promise<Buffer> {
  if (file !== undefined) {
    const bytes = await readKeyFile(file, 4096, tooLarge(file));
    if (bytes === undefined) throw new Error(`OPTMARK_VAULT_MASTER_KEY_FILE names ${file}, which does not exist`);
    return parse(file, bytes);
  }
  const local = join(dataDir, VAULT_MASTER_FILE);
  if (!store.sharesSecrets) {
    return loadOrCreateKeyFile(local, {
      parse: (b) => parse(local, b),
      make: async () => {
        const value = randomBytes(KEY_BYTES);
        return { value, bytes: value };
      },
      max: 4096,
      tooLarge: tooLarge(local),
    });
  }
  const shared = await store.sharedSecret(VAULT_MASTER_SECRET, () => randomBytes(KEY_BYTES));
  if (!(await readKeyFile(local, 4096, tooLarge(local)))?.equals(shared)) await writeKeyFile(local, shared, { how: 'replace' });
  return parse(VAULT_MASTER_SECRET, shared);
}
