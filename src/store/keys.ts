/**
 * API key format, generation and hashing.
 *
 * A key is `om_live_` followed by 43 base62 characters: 43 × log2(62) ≈ 256 bits from the CSPRNG. The
 * fixed prefix makes a leaked key recognisable to people and secret scanners; base62 keeps it one "word"
 * (double-click selects all of it, no URL or shell escaping). Only SHA-256(key) is stored, plus a display
 * prefix of 16 characters (the fixed 8 and 8 random, ≈48 bits) for `key list` and `key revoke`.
 */
import crypto, { randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'om_live_';
const BODY_LENGTH = 43;
export const KEY_LENGTH = KEY_PREFIX.length + BODY_LENGTH;
/** Characters of a key kept in clear for operators: enough to tell keys apart, far too few to guess the rest. */
export const DISPLAY_PREFIX_LENGTH = 16;
/** Shortest prefix `key revoke` accepts: the fixed part plus 4 random characters (≈24 bits). */
export const MIN_REVOKE_PREFIX_LENGTH = 12;

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
// 248 = 4 × 62: bytes at or above it are dropped so every character is equally likely (no modulo bias).
const UNBIASED_BELOW = 248;
const KEY_SHAPE = /^om_live_[0-9A-Za-z]{43}$/;
const PREFIX_SHAPE = /^om_live_[0-9A-Za-z]*$/;

/** A new random key; the caller shows it once and stores only `hashKey(key)`. */
export function generateKey(): string {
  let body = '';
  while (body.length < BODY_LENGTH) {
    for (const byte of randomBytes(64)) {
      if (byte < UNBIASED_BELOW) body += ALPHABET[byte % 62];
      if (body.length === BODY_LENGTH) break;
    }
  }
  return KEY_PREFIX + body;
}

/** True when `value` has the exact shape of a key; checked before any database access. */
export function isWellFormedKey(value: string): boolean {
  return value.length === KEY_LENGTH && KEY_SHAPE.test(value);
}

/** True when `value` could be the start of a key (used to validate `key revoke` arguments). */
export function isKeyPrefix(value: string): boolean {
  return value.length <= KEY_LENGTH && PREFIX_SHAPE.test(value);
}

/**
 * The stored form of a key. A plain SHA-256 is right here, unlike for passwords: the key carries 256
 * random bits, so no dictionary or brute force applies, and a slow KDF (bcrypt, scrypt) would add
 * milliseconds to every request and rule out the unique-index lookup by hash.
 */
export function hashKey(key: string): Buffer {
  return oneShot ? oneShot('sha256', key, 'buffer') : crypto.createHash('sha256').update(key, 'utf8').digest();
}

/** Node's one-shot digest (20.12 on): no Hash object for the SHA-256 that every API request takes of its key. */
const oneShot = typeof crypto.hash === 'function' ? crypto.hash : undefined;

/** The part of a key shown by `key list`. */
export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_PREFIX_LENGTH);
}
