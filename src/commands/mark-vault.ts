/**
 * `optmark mark --vault ACCOUNT` (docs/vault.md, "From the command line"): every file marked keeps its
 * original and its marked file in the account's Private Vault, through the same Vault service the server
 * runs (the configured store, storage and master key; the original's perceptual hash from the same
 * functions the image workers run). Around each file:
 *
 *   in place: the original read before the lane replaces it ── the lane marks ── done (or skipped as up
 *   to date below --out): original and marked file put, both or neither ── a refusal (vault off, over the
 *   limit) is that file's failure; its output stays written
 *
 * The command line makes no dashboard record, so the objects' `record` is null.
 */
import { open, readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { FileJob, FileOutcome } from '../batch/work.js';
import type { Config } from '../config.js';
import { toErrorShape } from '../errors.js';
import { detectFormat } from '../formats/index.js';
import type { Store } from '../store/index.js';
import type { Vault } from '../vault/service.js';
import { UsageError } from './args.js';

/** Enough of a file's first bytes to tell its format. */
const SNIFF_BYTES = 32;

export interface VaultKeep {
  /** The account whose vault keeps the files. */
  readonly account: string;
  /** The runner's hook (src/batch/runner.ts BatchHooks.around). */
  around(job: FileJob, run: () => Promise<FileOutcome>): Promise<FileOutcome>;
  /** One line for the summary: objects kept now and files whose pair was kept already. */
  summary(): string;
  close(): Promise<void>;
}

/**
 * Opens the store and the account's vault for `mark --vault`. Throws UsageError for an unknown account;
 * resolves to a message (exit 1, nothing marked) when the vault is off or the store cannot be opened.
 */
export async function openVaultKeep(config: Config, accountName: string, maxFileBytes: number): Promise<VaultKeep | string> {
  const [{ openStore }, { StoreError }] = await Promise.all([import('../store/index.js'), import('../store/errors.js')]);
  let store: Store | undefined;
  try {
    store = await openStore(config);
    let account;
    try {
      account = await store.getAccount(accountName);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'unknown_account') throw new UsageError(`mark: --vault names no account: ${JSON.stringify(accountName)}`);
      throw err;
    }
    const vault = await openCliVault(config, store);
    if (!(await vault.state(account.id)).enabled) {
      await store.close();
      return (
        `the Private Vault of account ${account.name} is off (vault_disabled); nothing was marked. ` +
        'Its user turns it on in the dashboard (Settings) or with PUT /api/v1/vault.'
      );
    }
    return keeper(store, vault, account, maxFileBytes);
  } catch (err) {
    await store?.close();
    if (err instanceof StoreError) return err.message;
    throw err;
  }
}

/** The Vault as `optmark serve` builds it, with the perceptual hash computed here rather than in a pool. */
async function openCliVault(config: Config, store: Store): Promise<Vault> {
  const [{ Vault }, { vaultStorage }, { vaultMasterKey }, { keptHash }, { perceptualHash }] = await Promise.all([
    import('../vault/service.js'),
    import('../vault/start.js'),
    import('../vault/keys.js'),
    import('../vault/recognition.js'),
    import('../vault/phash.js'),
  ]);
  return new Vault({
    rows: store.vault,
    storage: vaultStorage(config),
    masterKey: await vaultMasterKey(config.dataDir, store, config.vaultMasterKeyFile),
    defaultLimitBytes: config.vaultLimitBytes,
    // What the image worker's `phash` task runs and the server's poolHashOf keeps (src/vault/recognition.ts).
    hashOf: async (bytes) => keptHash(await perceptualHash(bytes)),
  });
}

function keeper(store: Store, vault: Vault, account: { id: number; name: string }, maxFileBytes: number): VaultKeep {
  let objects = 0;
  let bytes = 0;
  let already = 0;

  /** Both files of a mark, or neither: an object put here is deleted again when its partner is refused. */
  async function keepPair(original: Buffer, originalName: string, marked: Buffer, markedName: string): Promise<void> {
    const mime = (b: Buffer) => detectFormat(b)?.mimeType ?? 'application/octet-stream';
    const first = await vault.put(account.id, { bytes: original, name: originalName, mimeType: mime(original), kind: 'original' });
    let second;
    try {
      second = await vault.put(account.id, { bytes: marked, name: markedName, mimeType: mime(marked), kind: 'marked' });
    } catch (err) {
      if (first.created) await vault.delete(account.id, first.object.id).catch(() => undefined);
      throw err;
    }
    for (const p of [first, second]) {
      if (!p.created) continue;
      objects++;
      bytes += p.object.bytes;
    }
    if (!first.created && !second.created) already++;
  }

  return {
    account: account.name,
    async around(job, run) {
      // In place, the lane replaces the input: its bytes are read first (only when it is an image).
      const before = job.inPlace ? await readImage(job.source, maxFileBytes).catch(() => undefined) : undefined;
      const o = await run();
      const marked = o.status === 'done' || (o.status === 'skipped' && o.code === 'up_to_date');
      if (!marked || !o.output) return o;
      try {
        const original = job.inPlace ? before : await readFile(job.source);
        if (!original) throw new Error(`${job.input} could not be read before it was marked`);
        // In place and unchanged (it carried the field already), nothing was written: the same bytes.
        const result = job.inPlace && o.changed === false ? original : await readFile(o.output);
        await keepPair(original, basename(job.input), result, basename(o.output));
        return o;
      } catch (err) {
        const shape = toErrorShape(err);
        const code = shape.code === 'internal_error' ? 'vault_keep_failed' : shape.code;
        const why = shape.code === 'internal_error' && err instanceof Error ? err.message : shape.message;
        return { ...o, status: 'failed', code, message: `marked, but not kept in the vault of ${account.name}: ${why}` };
      }
    },
    summary() {
      return `vault of ${account.name}: ${objects} object${objects === 1 ? '' : 's'} kept (${bytes} bytes)${already > 0 ? `, ${already} file${already === 1 ? '' : 's'} kept already` : ''}`;
    },
    close: () => store.close(),
  };
}

/** The file's bytes when it is a JPEG, PNG or WebP of at most `max` bytes; undefined for anything else. */
async function readImage(path: string, max: number): Promise<Buffer | undefined> {
  const fh = await open(path, 'r');
  try {
    const { size } = await fh.stat();
    if (size > max) return undefined;
    const head = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await fh.read(head, 0, SNIFF_BYTES, 0);
    if (!detectFormat(head.subarray(0, bytesRead))) return undefined;
    const whole = Buffer.alloc(size);
    let at = 0;
    while (at < size) {
      const { bytesRead: n } = await fh.read(whole, at, size - at, at);
      if (n === 0) break; // cut short while being read: what was there
      at += n;
    }
    return whole.subarray(0, at);
  } finally {
    await fh.close();
  }
}
