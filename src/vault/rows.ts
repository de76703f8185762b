/**
 * The vault's rows, one interface for both store engines (./rows-sqlite.ts, ./rows-postgres.ts):
 *
 *   vault_accounts      on/off, the account's limit override, bytes used, the wrapped data key
 *   vault_objects       one row per stored object: content-addressed per account (unique sha256)
 *   vault_reservations  bytes held for a write in progress, with an expiry
 *
 * Usage follows the discipline of the monthly counters: bytes are reserved before the write (refused
 * past the limit, counting what others hold), the object row and its bytes are added to `used` in the
 * transaction that drops the reservation, and a failed write gives its reservation back. A reservation
 * of a process killed mid-write runs out at its expiry (the reconciler drops it), so the bytes it held
 * return without anyone's help.
 */
import type { VaultMatch } from './recognition.js';

export type VaultKind = 'original' | 'marked';

export interface VaultObject {
  id: string;
  name: string;
  sha256: string;
  bytes: number;
  mimeType: string;
  createdAt: string;
  kind: VaultKind;
  /** The dashboard record it belongs to, if any. */
  record: string | null;
}

/** A row as the service needs it: the object and where its bytes are. */
export interface VaultObjectRow extends VaultObject {
  storageKey: string;
  phash: string | null;
}

export interface VaultState {
  enabled: boolean;
  /** The account's own limit, or null for the service's. */
  limitBytes: number | null;
  usedBytes: number;
  reservedBytes: number;
  objects: number;
  wrappedKey: string | null;
}

export interface VaultQuery {
  /** Part of the name (any case), or the whole SHA-256 or record id. */
  q?: string;
  name?: string;
  sha256?: string;
  record?: string;
  /** Objects older than this place (the previous page's last: createdAt and id). */
  after?: { createdAt: string; id: string };
  limit: number;
}

export type ReserveResult =
  | { ok: true; id: string }
  | { ok: false; reason: 'disabled' }
  | { ok: false; reason: 'over'; usedBytes: number; reservedBytes: number; limitBytes: number };

export interface VaultRows {
  state(accountId: number): Promise<VaultState>;
  setEnabled(accountId: number, enabled: boolean): Promise<void>;
  /** The account's limit override (null: the service's setting). */
  setLimit(accountId: number, limitBytes: number | null): Promise<void>;
  /** The account's wrapped data key: the one kept, or `wrapped` kept now when it had none. */
  keepKey(accountId: number, wrapped: string): Promise<string>;
  /** Holds `bytes` for a write if the vault is on and used + reserved + bytes stays within the limit. */
  reserve(accountId: number, bytes: number, defaultLimit: number, expiresAt: Date): Promise<ReserveResult>;
  /** Gives a reservation back (a failed or duplicate write). */
  release(reservationId: string): Promise<void>;
  /**
   * Adds the object and its bytes to `used` and drops the reservation, in one transaction. When the
   * account already keeps these bytes (same sha256), nothing is added: the kept object comes back with
   * `created` false, and the caller removes the bytes it wrote.
   */
  commit(reservationId: string, accountId: number, row: VaultObjectRow): Promise<{ object: VaultObjectRow; created: boolean }>;
  bySha(accountId: number, sha256: string): Promise<VaultObjectRow | undefined>;
  get(accountId: number, id: string): Promise<VaultObjectRow | undefined>;
  list(accountId: number, q: VaultQuery): Promise<VaultObjectRow[]>;
  /** Removes the row and its bytes from `used`; the row as it was, or undefined. */
  remove(accountId: number, id: string): Promise<VaultObjectRow | undefined>;
  /** Removes rows by storage key whatever their account (the reconciler: bytes missing from storage). */
  removeByStorageKey(keys: string[]): Promise<number>;
  /** Every account's wrapped data key (accounts that have one), by account id. */
  wrappedKeys(): Promise<{ accountId: number; wrapped: string }[]>;
  /**
   * The master key's rotation (src/vault/rotate.ts): every wrapped data key replaced by `rewrap(it)`, in
   * one transaction (a throw changes nothing). With `secret`, the store's shared secret of that name is
   * set to its value in the same transaction (PostgreSQL; SQLite keeps its secrets as files and has none).
   * How many keys were re-wrapped.
   */
  rewrapKeys(rewrap: (wrapped: string, accountId: number) => string, secret?: { name: string; value: Buffer }): Promise<number>;
  /** Objects kept, all accounts together. */
  objectCount(): Promise<number>;
  /** Every storage key a row names (the reconciler). */
  storageKeys(): Promise<Set<string>>;
  /** Drops reservations that expired by `now`; how many. */
  dropExpired(now: Date): Promise<number>;
  /**
   * The account's originals within PDQ_MATCH_DISTANCE of `hash` (a 64-hex PDQ hash), nearest first, at
   * most MAX_VAULT_MATCHES (src/vault/recognition.ts): verify?vault=match, Inspect and repository scans.
   */
  vaultMatches(accountId: number, hash: string): Promise<VaultMatch[]>;
}

export type { VaultMatch } from './recognition.js';

export const DEFAULT_VAULT_LIMIT_BYTES = 10_000_000_000;

/** A page of objects is at most this many. */
export const MAX_VAULT_PAGE = 200;

/** A vault_objects row as both engines return it. */
export interface ObjectRow {
  id: string;
  name: string;
  sha256: string;
  bytes: number;
  mime_type: string;
  created_at: string;
  kind: 'original' | 'marked';
  record_id: string | null;
  storage_key: string;
  phash: string | null;
}

export const COLUMNS = 'id, name, sha256, bytes, mime_type, created_at, kind, record_id, storage_key, phash';

export function toObject(r: ObjectRow): VaultObjectRow {
  return {
    id: r.id,
    name: r.name,
    sha256: r.sha256,
    bytes: Number(r.bytes),
    mimeType: r.mime_type,
    createdAt: r.created_at,
    kind: r.kind,
    record: r.record_id,
    storageKey: r.storage_key,
    phash: r.phash,
  };
}

/** `%` and `_` in a name search are the characters themselves. */
export const likeOf = (s: string): string => `%${s.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
