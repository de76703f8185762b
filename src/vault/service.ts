/**
 * The Private Vault (docs/vault.md): an account's originals and marked files, sealed under its data key
 * (./crypto.ts) in a storage backend (./storage.ts), with rows and usage in the store (./rows.ts).
 *
 *   put     already kept (same SHA-256)? that object; else reserve the bytes (vault on, within the
 *           limit) ── hash an original (recognition) ── seal and write under a fresh random key ──
 *           commit the row (usage added, reservation dropped); any failure gives the reservation back
 *           and removes what was written
 *   read    the segments a range needs, opened and cut to the range
 *   delete  the row (usage given back), then the bytes
 *   reconcile  expired reservations dropped; stored objects no row names (past a grace period) removed;
 *           rows whose bytes are gone removed
 */
import { createHash, randomUUID } from 'node:crypto';
import { buffer } from 'node:stream/consumers';
import { OptmarkError } from '../errors.js';
import { HEADER_BYTES, newWrappedKey, open, SEGMENT_BYTES, seal, segmentCount, storedRange, unwrapKey } from './crypto.js';
import type { VaultKind, VaultObjectRow, VaultQuery, VaultRows, VaultState } from './rows.js';
import { newObjectKey, type VaultStorage } from './storage.js';

/** A reservation outlives any write by far; one of a process killed mid-write runs out after this. */
export const RESERVATION_MS = 15 * 60_000;
/** The reconciler leaves stored objects younger than this alone: their row may be about to be committed. */
export const ORPHAN_GRACE_MS = 60 * 60_000;

export interface VaultOptions {
  rows: VaultRows;
  storage: VaultStorage;
  /** The vault master key (32 bytes, ./keys.ts). */
  masterKey: Buffer;
  /** OPTMARK_VAULT_LIMIT_BYTES: an account's limit unless it has its own. */
  defaultLimitBytes: number;
  /** The perceptual hash of an original, kept for recognition (null: none). */
  hashOf?: (bytes: Uint8Array) => Promise<string | null>;
  now?: () => Date;
}

export interface PutRequest {
  bytes: Uint8Array;
  name: string;
  mimeType: string;
  kind: VaultKind;
  record?: string | null;
}

export interface ReconcileReport {
  expiredReservations: number;
  orphanObjects: number;
  missingObjects: number;
}

export interface Opened {
  object: VaultObjectRow;
  /** Inclusive plaintext range served. */
  start: number;
  end: number;
  body: AsyncIterable<Uint8Array>;
}

export class Vault {
  readonly #o: VaultOptions;
  readonly #now: () => Date;
  /** Unwrapped data keys by account: the wrapped key never changes once kept. */
  readonly #keys = new Map<number, Buffer>();

  constructor(options: VaultOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => new Date());
  }

  get storageKind(): string {
    return this.#o.storage.kind;
  }

  async state(accountId: number): Promise<VaultState & { limit: number }> {
    const s = await this.#o.rows.state(accountId);
    return { ...s, limit: s.limitBytes ?? this.#o.defaultLimitBytes };
  }

  setEnabled(accountId: number, enabled: boolean): Promise<void> {
    return this.#o.rows.setEnabled(accountId, enabled);
  }

  async #dataKey(accountId: number): Promise<Buffer> {
    const cached = this.#keys.get(accountId);
    if (cached) return cached;
    const state = await this.#o.rows.state(accountId);
    const wrapped = state.wrappedKey ?? (await this.#o.rows.keepKey(accountId, newWrappedKey(this.#o.masterKey).wrapped));
    const key = unwrapKey(this.#o.masterKey, wrapped);
    this.#keys.set(accountId, key);
    return key;
  }

  /** Stores `req` for the account, or finds it kept already; refuses when the vault is off or full. */
  async put(accountId: number, req: PutRequest): Promise<{ object: VaultObjectRow; created: boolean }> {
    const sha256 = createHash('sha256').update(req.bytes).digest('hex');
    const kept = await this.#o.rows.bySha(accountId, sha256);
    if (kept) {
      // Kept already: counted once. The vault must still be on for a new store to be accepted.
      if (!(await this.#o.rows.state(accountId)).enabled) throw disabled();
      return { object: kept, created: false };
    }
    const now = this.#now();
    const r = await this.#o.rows.reserve(accountId, req.bytes.length, this.#o.defaultLimitBytes, new Date(now.getTime() + RESERVATION_MS));
    if (!r.ok) {
      if (r.reason === 'disabled') throw disabled();
      throw new OptmarkError(
        'vault_quota_exceeded',
        `Storing these ${req.bytes.length} bytes would take the vault past its limit of ${r.limitBytes} bytes (${r.usedBytes} used, ${r.reservedBytes} held by writes in progress); nothing was stored.`,
      );
    }
    const storageKey = newObjectKey();
    let written = false;
    try {
      // The perceptual hash (an image worker's decode) runs while the bytes are sealed and written.
      const hashing = req.kind === 'original' && this.#o.hashOf ? this.#o.hashOf(req.bytes).catch(() => null) : Promise.resolve(null);
      const key = await this.#dataKey(accountId);
      await this.#o.storage.put(storageKey, seal(key, storageKey, once(req.bytes)));
      written = true;
      const phash = await hashing;
      const row: VaultObjectRow = {
        id: randomUUID(),
        name: req.name,
        sha256,
        bytes: req.bytes.length,
        mimeType: req.mimeType,
        createdAt: now.toISOString(),
        kind: req.kind,
        record: req.record ?? null,
        storageKey,
        phash,
      };
      const done = await this.#o.rows.commit(r.id, accountId, row);
      if (!done.created) await this.#o.storage.delete(storageKey).catch(() => undefined);
      return done;
    } catch (err) {
      await this.#o.rows.release(r.id).catch(() => undefined);
      if (written) await this.#o.storage.delete(storageKey).catch(() => undefined);
      throw err;
    }
  }

  get(accountId: number, id: string): Promise<VaultObjectRow | undefined> {
    return this.#o.rows.get(accountId, id);
  }

  list(accountId: number, q: VaultQuery): Promise<VaultObjectRow[]> {
    return this.#o.rows.list(accountId, q);
  }

  /** The object's plaintext bytes [start, end] (inclusive; the whole object without a range). */
  async read(accountId: number, object: VaultObjectRow, range?: { start: number; end: number }): Promise<Opened> {
    const start = range?.start ?? 0;
    const end = range?.end ?? object.bytes - 1;
    const key = await this.#dataKey(accountId);
    const header = await buffer(await this.#o.storage.get(object.storageKey, 0, HEADER_BYTES - 1));
    const span = storedRange(object.bytes, start, end);
    const sealed = await this.#o.storage.get(object.storageKey, span.from, span.to);
    const segments = segmentCount(object.bytes);
    const plain = open(key, object.storageKey, header, sealed, span.first, span.last, segments);
    async function* cut(): AsyncGenerator<Uint8Array> {
      let at = span.first * SEGMENT_BYTES;
      for await (const seg of plain) {
        const from = Math.max(start - at, 0);
        const to = Math.min(end + 1 - at, seg.length);
        if (to > from) yield seg.subarray(from, to);
        at += seg.length;
        if (at > end) break;
      }
    }
    return { object, start, end, body: object.bytes === 0 ? (async function* () {})() : cut() };
  }

  /** Deletes the object: its row (usage given back), then its bytes. False when the account has none such. */
  async delete(accountId: number, id: string): Promise<boolean> {
    const row = await this.#o.rows.remove(accountId, id);
    if (!row) return false;
    await this.#o.storage.delete(row.storageKey);
    return true;
  }

  async reconcile(): Promise<ReconcileReport> {
    const now = this.#now();
    const expiredReservations = await this.#o.rows.dropExpired(now);
    const named = await this.#o.rows.storageKeys();
    const stored = new Set<string>();
    let orphanObjects = 0;
    for await (const o of this.#o.storage.list()) {
      stored.add(o.key);
      if (named.has(o.key)) continue;
      if (now.getTime() - o.modifiedAt.getTime() < ORPHAN_GRACE_MS) continue;
      await this.#o.storage.delete(o.key);
      orphanObjects++;
    }
    // Rows named before the listing began whose bytes the listing did not see.
    const missing = [...named].filter((k) => !stored.has(k));
    const confirmed: string[] = [];
    for (const k of missing) if (!(await this.#o.storage.stat(k))) confirmed.push(k);
    const missingObjects = await this.#o.rows.removeByStorageKey(confirmed);
    return { expiredReservations, orphanObjects, missingObjects };
  }
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

function disabled(): OptmarkError {
  return new OptmarkError('vault_disabled', "This account's Private Vault is off: turn it on in the dashboard's Settings or with PUT /api/v1/vault.");
}
