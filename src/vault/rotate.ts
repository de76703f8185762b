/**
 * The vault master key's rotation (`optmark vault rotate-key`, docs/vault.md "Rotating the master key"):
 * every account's data key re-wrapped under a new master key in one transaction. The objects are not
 * touched: they are sealed under the data keys, which stay the same.
 *
 * The key is rotated where `optmark serve` reads it (./keys.ts), in an order that leaves, at every point
 * a kill can stop it, a key that opens every data key:
 *
 *   a key file (the data directory's vault-master.key, or OPTMARK_VAULT_MASTER_KEY_FILE's):
 *     the new key to <file>.next ── the rows re-wrapped (one transaction) ── <file> replaced ── .next removed
 *     killed before the commit: <file> still opens every data key; the stale .next is overwritten next time
 *     killed after it: <file> opens none, .next all; `serve` refuses to start and says so, and running
 *     rotate-key again finishes the rotation (puts .next in place) instead of starting another
 *   the store's shared secret `vault-master` (PostgreSQL): the rows and the secret in one transaction; the
 *     data directory's 0600 copy follows (each instance's start rewrites its own from the secret)
 */
import { randomBytes } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isErrno, readKeyFile, writeKeyFile } from '../secrets/files.js';
import type { Store } from '../store/index.js';
import { KEY_BYTES, unwrapKey, wrapKey } from './crypto.js';
import { opens, parse, sideKeyPath, tooLarge, VAULT_MASTER_FILE, VAULT_MASTER_SECRET, VaultKeyError } from './keys.js';

export interface Rotated {
  /** Accounts whose data key was re-wrapped. */
  accounts: number;
  /** Where the new key is kept (a file, or the shared secret and its copy). */
  where: string;
  /** `finished`: a rotation cut short was completed (its key put in place) rather than a new one made. */
  how: 'rotated' | 'finished';
}

async function readKey(path: string): Promise<Buffer | undefined> {
  const bytes = await readKeyFile(path, 4096, tooLarge(path));
  return bytes === undefined ? undefined : parse(path, bytes);
}

/** The new key: `given` (a file's 32 bytes) or 32 random ones; never the current one. */
function nextKey(current: Buffer, given: Buffer | undefined): Buffer {
  const next = given ?? randomBytes(KEY_BYTES);
  if (next.equals(current)) throw new VaultKeyError('the new master key is the current one; nothing was changed');
  return next;
}

/** Throws unless `current` opens every wrapped data key (a rotation must not re-wrap what it cannot open). */
function checkOpens(current: Buffer, where: string, wrapped: { accountId: number; wrapped: string }[]): void {
  const closed = wrapped.filter((w) => !opens(current, w.wrapped)).map((w) => w.accountId);
  if (closed.length === 0) return;
  throw new VaultKeyError(
    `the vault master key ${where} does not open the data keys of ${closed.length} of ${wrapped.length} accounts (ids ${closed.slice(0, 10).join(', ')}${closed.length > 10 ? ', ...' : ''}); nothing was changed`,
  );
}

/**
 * Rotates the master key `optmark serve` would use with these settings: `file` is
 * OPTMARK_VAULT_MASTER_KEY_FILE, `given` the new key (undefined: random). The instances must be stopped.
 */
export async function rotateMasterKey(dataDir: string, store: Store, file: string | undefined, given: Buffer | undefined): Promise<Rotated> {
  const rewrap = (current: Buffer, next: Buffer) => (wrapped: string) => wrapKey(next, unwrapKey(current, wrapped));
  if (file === undefined && store.sharesSecrets) {
    const copy = join(dataDir, VAULT_MASTER_FILE);
    const current = await store.sharedSecret(VAULT_MASTER_SECRET, () => randomBytes(KEY_BYTES));
    const where = `the store's shared secret ${VAULT_MASTER_SECRET}`;
    checkOpens(parse(VAULT_MASTER_SECRET, current), where, await store.vault.wrappedKeys());
    const next = nextKey(current, given);
    const accounts = await store.vault.rewrapKeys(rewrap(current, next), { name: VAULT_MASTER_SECRET, value: next });
    await writeKeyFile(copy, next, { how: 'replace' });
    return { accounts, where: `${where} (copy in ${copy})`, how: 'rotated' };
  }
  const path = file ?? join(dataDir, VAULT_MASTER_FILE);
  const side = sideKeyPath(path);
  const wrapped = await store.vault.wrappedKeys();
  const current = await readKey(path);
  const pending = await readKey(side);
  if (current === undefined) {
    if (wrapped.length > 0)
      throw new VaultKeyError(`there is no vault master key at ${path}, yet ${wrapped.length} accounts have data keys wrapped by one; nothing was changed`);
    // No key yet and nothing wrapped: the new key is simply the key (serve would have made one).
    await writeKeyFile(path, given ?? randomBytes(KEY_BYTES), { how: 'replace' });
    return { accounts: 0, where: path, how: 'rotated' };
  }
  if (pending && wrapped.length > 0 && !wrapped.some((w) => opens(current, w.wrapped)) && wrapped.every((w) => opens(pending, w.wrapped))) {
    // Cut short after the commit: the rows are the side key's already.
    await writeKeyFile(path, pending, { how: 'replace' });
    await removeSide(side);
    return { accounts: wrapped.length, where: path, how: 'finished' };
  }
  checkOpens(current, path, wrapped);
  const next = nextKey(current, given);
  await writeKeyFile(side, next, { how: 'replace' });
  const accounts = await store.vault.rewrapKeys(rewrap(current, next));
  await writeKeyFile(path, next, { how: 'replace' });
  await removeSide(side);
  return { accounts, where: path, how: 'rotated' };
}

async function removeSide(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
  }
}
