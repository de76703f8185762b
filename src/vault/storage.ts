/**
 * Where the vault's sealed objects live: one small interface, two backends — a folder under the data
 * directory (./folder.ts, the embedded default) and S3-compatible object storage (./s3.ts), which many
 * instances share. Keys are opaque (`newObjectKey`): random, never derived from the account or the name.
 */
import { randomBytes } from 'node:crypto';

export interface StoredObject {
  key: string;
  bytes: number;
  /** When it was written (the reconciler leaves young objects alone: a write may still be linking them). */
  modifiedAt: Date;
}

export interface VaultStorage {
  /** `file` or `s3`, for logs and metrics. */
  readonly kind: string;
  /** Writes `chunks` under `key` whole or not at all; resolves with the bytes written. */
  put(key: string, chunks: AsyncIterable<Uint8Array>): Promise<number>;
  /** Stored bytes [from, to] (inclusive; to past the end is the end); throws VaultMissingError for no object. */
  get(key: string, from?: number, to?: number): Promise<AsyncIterable<Uint8Array>>;
  stat(key: string): Promise<StoredObject | undefined>;
  /** Removes the bytes; no error when they are already gone. */
  delete(key: string): Promise<void>;
  /** Every stored object, in no set order. */
  list(): AsyncIterable<StoredObject>;
}

export class VaultMissingError extends Error {
  readonly code = 'vault_object_missing';
}

/** A fresh object key: 32 hex digits in two levels of 2-digit folders' worth of spread. */
export function newObjectKey(): string {
  const hex = randomBytes(16).toString('hex');
  return `${hex.slice(0, 2)}/${hex}`;
}

/** Whether `key` is one newObjectKey makes (anything else found in storage is not the vault's). */
export function isObjectKey(key: string): boolean {
  return /^[0-9a-f]{2}\/[0-9a-f]{32}$/.test(key) && key.slice(0, 2) === key.slice(3, 5);
}
