/**
 * Recognition: "looks like your original X". At ingest each original's PDQ hash is kept with it (the
 * store's `phash`); a verified picture's hash is compared with the account's kept hashes, and those within
 * PDQ_MATCH_DISTANCE are reported, nearest first. The comparison is a linear scan of one account's hashes
 * (popcount of XOR): bench/recognition.bench.ts measured it at 100,000 hashes (docs/vault.md).
 */
import type { ImagePool } from '../pool/pool.js';
import { isPdqHash, PDQ_MATCH_DISTANCE, PDQ_MIN_QUALITY, type PdqResult } from './phash.js';

/** A vault original a picture looks like (the verify answer's `vault` items). */
export interface VaultMatch {
  /** The object's id. */
  id: string;
  /** The object's file name. */
  name: string;
  /** PDQ bits that differ (0..256; 0: the same picture, as far as the hash can tell). */
  distance: number;
  /** The dashboard record the object belongs to, if any. */
  record: string | null;
}

/** An object with its kept hash, as the store hands it to `nearest`. */
export interface HashedObject {
  id: string;
  name: string;
  phash: string;
  record: string | null;
}

/** At most this many originals are reported for one picture. */
export const MAX_VAULT_MATCHES = 10;

/**
 * The hash an original keeps: null for no image sharp decodes and for a featureless one (quality under
 * PDQ_MIN_QUALITY), whose bits would match other featureless pictures by chance.
 */
export function keptHash(r: PdqResult | null | undefined): string | null {
  return r && r.quality >= PDQ_MIN_QUALITY ? r.hash : null;
}

/**
 * The vault's ingest hook (`hashOf`): the hash computed in an image worker, as all per-byte work is. The
 * bytes are copied to the worker; the caller keeps them. A failure of the hash itself (a decode past its
 * time limit) keeps the original without a hash, never matched; a full queue rejects as every task does.
 */
export function poolHashOf(pool: ImagePool): (bytes: Uint8Array) => Promise<string | null> {
  return async (bytes) => {
    const r = await pool.run({ kind: 'phash', input: bytes });
    return r.ok && r.kind === 'phash' ? keptHash(r.phash) : null;
  };
}

/** A probe's 256 bits as eight 32-bit words, parsed once for a whole scan. */
function words(hash: string): Uint32Array {
  const w = new Uint32Array(8);
  for (let i = 0; i < 8; i++) w[i] = Number.parseInt(hash.slice(i * 8, i * 8 + 8), 16);
  return w;
}

function popcount32(x: number): number {
  let v = x - ((x >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

/**
 * The objects whose hash is within `max` of `hash`, nearest first (then by id), at most `limit`. A kept
 * hash that is not 64 hex digits is passed over. The scan stops counting an object at the first word past
 * `max`.
 */
export function nearest(objects: Iterable<HashedObject>, hash: string, max = PDQ_MATCH_DISTANCE, limit = MAX_VAULT_MATCHES): VaultMatch[] {
  if (!isPdqHash(hash)) throw new RangeError('nearest: not a PDQ hash (64 hex digits)');
  const probe = words(hash);
  const found: VaultMatch[] = [];
  for (const o of objects) {
    if (o.phash.length !== 64) continue;
    let d = 0;
    for (let i = 0; i < 8 && d <= max; i++) {
      const w = Number.parseInt(o.phash.slice(i * 8, i * 8 + 8), 16);
      if (Number.isNaN(w)) {
        d = 257;
        break;
      }
      d += popcount32((w ^ probe[i]!) >>> 0);
    }
    if (d <= max && isPdqHash(o.phash)) found.push({ id: o.id, name: o.name, distance: d, record: o.record });
  }
  found.sort((a, b) => a.distance - b.distance || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return found.slice(0, limit);
}
