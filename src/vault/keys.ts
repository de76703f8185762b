/**
 * The vault master key: 32 random bytes kept with the service's other secrets. On SQLite it is the data
 * directory's `vault-master.key` (mode 0600), made on first use; with PostgreSQL the store's shared
 * secret `vault-master`, so every instance seals and opens with the same key, and a 0600 copy is kept in
 * the data directory for backups. OPTMARK_VAULT_MASTER_KEY_FILE names a file of the operator's instead.
 * Rotation (./rotate.ts): the data keys are re-wrapped under a new master key; objects stay as stored. A
 * key file with a `.next` beside it that opens the data keys the file does not is a rotation cut short:
 * the start refuses and says so.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { loadOrCreateKeyFile, readKeyFile, writeKeyFile } from '../secrets/files.js';
import type { Store } from '../store/index.js';
import { KEY_BYTES, unwrapKey } from './crypto.js';
import type { VaultRows } from './rows.js';

export const VAULT_MASTER_FILE = 'vault-master.key';
export const VAULT_MASTER_SECRET = 'vault-master';

/** A master key problem whose message says what to do (printed without a stack). */
export class VaultKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultKeyError';
  }
}

/** Where a rotation puts the new key of a key file until the store's rows are re-wrapped under it. */
export const sideKeyPath = (path: string): string => `${path}.next`;

export const tooLarge = (path: string) => (size: number) => new Error(`${path} is ${size} bytes; a vault master key file holds ${KEY_BYTES}`);

export function parse(path: string, bytes: Buffer): Buffer {
  if (bytes.length !== KEY_BYTES) throw new Error(`${path} holds ${bytes.length} bytes; a vault master key is ${KEY_BYTES} random bytes`);
  return bytes;
}

/** The master key: the operator's file, the store's shared secret (PostgreSQL), or the data directory's own. */
export async function vaultMasterKey(dataDir: string, store: Store, file?: string): Promise<Buffer> {
  if (file !== undefined) {
    const bytes = await readKeyFile(file, 4096, tooLarge(file));
    if (bytes === undefined) throw new Error(`OPTMARK_VAULT_MASTER_KEY_FILE names ${file}, which does not exist`);
    return refuseCutRotation(file, parse(file, bytes), store.vault);
  }
  const local = join(dataDir, VAULT_MASTER_FILE);
  if (!store.sharesSecrets) {
    const key = await loadOrCreateKeyFile(local, {
      parse: (b) => parse(local, b),
      make: async () => {
        const value = randomBytes(KEY_BYTES);
        return { value, bytes: value };
      },
      max: 4096,
      tooLarge: tooLarge(local),
    });
    return refuseCutRotation(local, key, store.vault);
  }
  const shared = await store.sharedSecret(VAULT_MASTER_SECRET, () => randomBytes(KEY_BYTES));
  if (!(await readKeyFile(local, 4096, tooLarge(local)))?.equals(shared)) await writeKeyFile(local, shared, { how: 'replace' });
  return parse(VAULT_MASTER_SECRET, shared);
}

/** Whether `master` opens the wrapped data key. */
export function opens(master: Buffer, wrapped: string): boolean {
  try {
    unwrapKey(master, wrapped);
    return true;
  } catch {
    return false;
  }
}

/**
 * `key` (read from `path`), unless a rotation was cut short after its rows were committed: then `key`
 * opens none of the data keys and the side file opens them all, and starting would fail every vault.
 */
async function refuseCutRotation(path: string, key: Buffer, rows: VaultRows): Promise<Buffer> {
  const sidePath = sideKeyPath(path);
  const side = await readKeyFile(sidePath, 4096, tooLarge(sidePath));
  if (side === undefined || side.length !== KEY_BYTES) return key;
  const wrapped = await rows.wrappedKeys();
  if (wrapped.length === 0 || wrapped.some((w) => opens(key, w.wrapped)) || !wrapped.every((w) => opens(side, w.wrapped))) return key;
  throw new VaultKeyError(
    `the vault master key ${path} opens none of the ${wrapped.length} accounts' data keys, but ${sidePath} opens them all: ` +
      `an \`optmark vault rotate-key\` was cut short after it re-wrapped them. Run \`optmark vault rotate-key\` again to finish it (it puts ${sidePath} in place), then start.`,
  );
}
