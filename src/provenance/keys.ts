/**
 * Ed25519 signing keys for the provenance tag (node:crypto). Layout in the data directory:
 *
 *   signing/              0700
 *     current.pem         0600  PKCS#8 PEM private key new tags are signed with
 *     public/<keyid>.pem        SPKI PEM public key of every key this data directory ever signed with
 *
 * A key id is the first 16 hex digits of SHA-256 over the raw 32-byte public key, so it is derived
 * from the key, never trusted from a file name. Rotation writes a new current.pem and keeps every
 * public key, so older signatures stay verifiable; old private keys are not kept (nothing needs them).
 * OPTMARK_SIGNING_KEY_FILE replaces current.pem; its public key is recorded in public/ on first use.
 * Private key material is never put into an error message or a log line.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { chmod, mkdir, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { isErrno, PRIVATE_DIR_MODE, PUBLIC_FILE_MODE, readKeyFile as readBounded, writeKeyFile } from '../secrets/files.js';
import { SigningKeyError } from './errors.js';

export const SIGNING_DIR = 'signing';
export const CURRENT_KEY_FILE = 'current.pem';
export const PUBLIC_DIR = 'public';
/** An Ed25519 PEM is about 120 bytes; anything far larger is not a key and is not read. */
const MAX_KEY_FILE_BYTES = 16 * 1024;
/** Public keys read from the store at most (years of daily rotation); the rest are ignored. */
const MAX_PUBLIC_KEYS = 10_000;
/** Without a visible change to public/, verify rereads it on an unknown key id at most this often per worker. */
export const KEYRING_RELOAD_INTERVAL_MS = 1000;
export const KEY_ID_PATTERN = /^[0-9a-f]{16}$/;

/** Where the keys are: the data directory, and optionally a configured private key file. */
export interface KeyLocation {
  dataDir: string;
  /** OPTMARK_SIGNING_KEY_FILE: a PEM Ed25519 private key used instead of signing/current.pem. */
  file?: string | undefined;
}

export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

interface StorePaths {
  dir: string;
  current: string;
  publicDir: string;
}

function storePaths(dataDir: string): StorePaths {
  const dir = join(dataDir, SIGNING_DIR);
  return { dir, current: join(dir, CURRENT_KEY_FILE), publicDir: join(dir, PUBLIC_DIR) };
}

/** The key id of an Ed25519 public key: 16 hex digits of SHA-256 over its raw 32 bytes. */
export function keyIdOf(publicKey: KeyObject): string {
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
  return createHash('sha256').update(raw).digest('hex').slice(0, 16);
}

function signingKeyFrom(privateKey: KeyObject): SigningKey {
  const publicKey = createPublicKey(privateKey);
  return { keyId: keyIdOf(publicKey), privateKey, publicKey };
}

/** A small file's bytes, undefined when it does not exist; larger than a key file can be is an error. */
function readKeyFile(path: string): Promise<Buffer | undefined> {
  return readBounded(path, MAX_KEY_FILE_BYTES, (size) => new SigningKeyError('signing_key_invalid', `${path} is ${size} bytes, too large for a PEM key`));
}

function parsePrivateKey(pem: Buffer, source: string): SigningKey {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    // The crypto error is not passed on: it is about the bytes, which are secret.
    throw new SigningKeyError('signing_key_invalid', `${source} is not an unencrypted PEM private key`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new SigningKeyError(
      'signing_key_invalid',
      `${source} holds a ${key.asymmetricKeyType ?? 'unknown'} key; provenance needs Ed25519 (openssl genpkey -algorithm ed25519)`,
    );
  }
  return signingKeyFrom(key);
}

async function ensureStoreDirs(p: StorePaths): Promise<void> {
  await mkdir(p.publicDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // mkdir's mode applies only to directories it creates (and passes through the umask).
  await chmod(p.dir, PRIVATE_DIR_MODE);
}

/** Adds the public key to public/ unless it is there; atomic, so readers never see half a file. */
async function recordPublicKey(p: StorePaths, key: SigningKey): Promise<void> {
  const target = join(p.publicDir, `${key.keyId}.pem`);
  try {
    await stat(target);
    return;
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
  }
  await ensureStoreDirs(p);
  // A racing process recording the same key is fine: the file is the same.
  await writeKeyFile(target, key.publicKey.export({ type: 'spki', format: 'pem' }).toString(), { mode: PUBLIC_FILE_MODE });
}

/**
 * Installs a private key as current.pem (mode 0600). `create` never replaces an existing key and
 * returns false when another process created one first; `replace` swaps it atomically (rotation).
 */
async function installPrivateKey(p: StorePaths, key: SigningKey, how: 'create' | 'replace'): Promise<boolean> {
  await ensureStoreDirs(p);
  return writeKeyFile(p.current, key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), { how });
}

function generate(): SigningKey {
  return signingKeyFrom(generateKeyPairSync('ed25519').privateKey);
}

/**
 * The key new tags are signed with: the configured file, else signing/current.pem, created on first
 * use. Its public key is recorded in public/ so this server (and a rotation) can verify it later.
 */
export async function loadSigningKey(loc: KeyLocation): Promise<SigningKey> {
  const p = storePaths(loc.dataDir);
  if (loc.file !== undefined) {
    const pem = await readKeyFile(loc.file);
    if (!pem) throw new SigningKeyError('signing_key_missing', `OPTMARK_SIGNING_KEY_FILE ${loc.file} does not exist`);
    const key = parsePrivateKey(pem, `OPTMARK_SIGNING_KEY_FILE ${loc.file}`);
    await recordPublicKey(p, key);
    return key;
  }
  const existing = await readKeyFile(p.current);
  if (existing) {
    const key = parsePrivateKey(existing, p.current);
    await recordPublicKey(p, key);
    return key;
  }
  const fresh = generate();
  // The public key goes first: a signature can only exist once its public key does.
  await recordPublicKey(p, fresh);
  if (await installPrivateKey(p, fresh, 'create')) return fresh;
  // Another process created the key meanwhile; its key wins and ours never signed anything.
  await unlink(join(p.publicDir, `${fresh.keyId}.pem`)).catch(() => undefined);
  const raced = await readKeyFile(p.current);
  if (!raced) throw new SigningKeyError('signing_key_missing', `${p.current} vanished while it was being created`);
  return parsePrivateKey(raced, p.current);
}

export interface Rotation {
  keyId: string;
  /** The key that was current before, still verifiable; undefined on a store that had none. */
  previousKeyId: string | undefined;
}

/** Makes a new current key; every earlier public key stays in public/. Refused for a configured key file. */
export async function rotateSigningKey(loc: KeyLocation): Promise<Rotation> {
  if (loc.file !== undefined) {
    throw new SigningKeyError(
      'signing_key_external',
      `OPTMARK_SIGNING_KEY_FILE is set (${loc.file}): optmark does not replace a key it does not own. ` +
        'Generate a new key (openssl genpkey -algorithm ed25519 -out new.pem), point the variable at it and restart; ' +
        'the old key stays verifiable because its public key is kept in the data directory.',
    );
  }
  const p = storePaths(loc.dataDir);
  let previousKeyId: string | undefined;
  const existing = await readKeyFile(p.current);
  if (existing) {
    try {
      const previous = parsePrivateKey(existing, p.current);
      await recordPublicKey(p, previous);
      previousKeyId = previous.keyId;
    } catch (err) {
      // An unreadable current key is what rotation repairs; nothing it signed can be verified anyway.
      if (!(err instanceof SigningKeyError)) throw err;
    }
  }
  const fresh = generate();
  await recordPublicKey(p, fresh);
  await installPrivateKey(p, fresh, 'replace');
  return { keyId: fresh.keyId, previousKeyId };
}

export interface PublicKeyInfo {
  keyId: string;
  /** When the public key was recorded (file modification time), ISO 8601. */
  recordedAt: string;
  current: boolean;
}

export interface KeyListing {
  keys: PublicKeyInfo[];
  /** Files in public/ that are not Ed25519 public keys, and the private key path when it is unusable. */
  unreadable: string[];
}

/** The public keys this data directory verifies with, and which one signs (without creating any). */
export async function listSigningKeys(loc: KeyLocation): Promise<KeyListing> {
  const p = storePaths(loc.dataDir);
  const { keys, unreadable } = await readPublicDir(p.publicDir);
  let current: string | undefined;
  const currentPath = loc.file ?? p.current;
  try {
    const pem = await readKeyFile(currentPath);
    if (pem) current = parsePrivateKey(pem, currentPath).keyId;
  } catch (err) {
    if (!(err instanceof SigningKeyError)) throw err;
    unreadable.push(currentPath);
  }
  const out: PublicKeyInfo[] = [];
  for (const [keyId, { mtime }] of keys) out.push({ keyId, recordedAt: mtime.toISOString(), current: keyId === current });
  out.sort((a, b) => a.recordedAt.localeCompare(b.recordedAt) || a.keyId.localeCompare(b.keyId));
  return { keys: out, unreadable };
}

async function readPublicDir(dir: string): Promise<{ keys: Map<string, { key: KeyObject; mtime: Date }>; unreadable: string[] }> {
  const keys = new Map<string, { key: KeyObject; mtime: Date }>();
  const unreadable: string[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return { keys, unreadable };
    throw err;
  }
  for (const name of names
    .filter((n) => n.endsWith('.pem'))
    .sort()
    .slice(0, MAX_PUBLIC_KEYS)) {
    const path = join(dir, name);
    try {
      const [pem, st] = await Promise.all([readKeyFile(path), stat(path)]);
      if (!pem) continue; // removed meanwhile
      const key = createPublicKey({ key: pem, format: 'pem' });
      if (key.asymmetricKeyType !== 'ed25519') throw new Error('not ed25519');
      keys.set(keyIdOf(key), { key, mtime: st.mtime });
    } catch {
      unreadable.push(name);
    }
  }
  return { keys, unreadable };
}

/**
 * The public keys a verifier accepts, loaded once and reloaded when a tag names a key id it lacks (a
 * key rotated by the CLI while the server runs). A miss rereads public/ when its directory stamp
 * changed (one stat), or else at most once per interval (for file systems with coarse mtimes): an
 * attacker sending made-up key ids costs a stat per request and a readdir a second per worker at
 * most, and a new key is seen at once. Never throws.
 */
export class Keyring {
  readonly #location: KeyLocation;
  readonly #intervalMs: number;
  #keys = new Map<string, KeyObject>();
  #loadedAt = Number.NEGATIVE_INFINITY;
  /** Stamp of public/ taken just before the last read (undefined: it did not exist). */
  #dirStamp: string | undefined;
  #loading: Promise<void> | undefined;

  constructor(location: KeyLocation, intervalMs = KEYRING_RELOAD_INTERVAL_MS) {
    this.#location = location;
    this.#intervalMs = intervalMs;
  }

  /** A keyring with the keys on disk now. */
  static async open(location: KeyLocation, intervalMs?: number): Promise<Keyring> {
    const ring = new Keyring(location, intervalMs);
    await ring.reload();
    return ring;
  }

  get size(): number {
    return this.#keys.size;
  }

  /** The public key for a key id, reloading from disk on a miss when public/ changed (or, rate-limited, anyway). */
  async find(keyId: string): Promise<KeyObject | undefined> {
    const hit = this.#keys.get(keyId);
    if (hit || !KEY_ID_PATTERN.test(keyId)) return hit;
    if (performance.now() - this.#loadedAt < this.#intervalMs && !(await this.#changedOnDisk())) return undefined;
    await this.reload();
    return this.#keys.get(keyId);
  }

  async #changedOnDisk(): Promise<boolean> {
    try {
      return (await stampOf(storePaths(this.#location.dataDir).publicDir)) !== this.#dirStamp;
    } catch {
      return false;
    }
  }

  /** Rereads the public keys (concurrent callers share one read). A failed read keeps the keys it had. */
  reload(): Promise<void> {
    return (this.#loading ??= this.#read().finally(() => (this.#loading = undefined)));
  }

  async #read(): Promise<void> {
    this.#loadedAt = performance.now();
    const publicDir = storePaths(this.#location.dataDir).publicDir;
    let found: Map<string, { key: KeyObject }>;
    try {
      // Stamped before reading: a key added during the read shows as a change on the next miss.
      this.#dirStamp = await stampOf(publicDir);
      found = (await readPublicDir(publicDir)).keys;
    } catch {
      return;
    }
    const keys = new Map<string, KeyObject>();
    for (const [id, { key }] of found) keys.set(id, key);
    if (this.#location.file !== undefined) {
      try {
        const pem = await readKeyFile(this.#location.file);
        if (pem) {
          const own = parsePrivateKey(pem, this.#location.file);
          keys.set(own.keyId, own.publicKey);
        }
      } catch {
        // An unusable configured key only makes its tags unverifiable; `mark` reports the error.
      }
    }
    this.#keys = keys;
  }
}

/**
 * The current signing key, cached per worker and reloaded when its file changes (one stat per call),
 * so a long-running signer picks up a rotation without a restart.
 */
export class SigningKeySource {
  readonly #location: KeyLocation;
  #cached: { stamp: string; key: SigningKey } | undefined;

  constructor(location: KeyLocation) {
    this.#location = location;
  }

  async get(): Promise<SigningKey> {
    const path = this.#location.file ?? storePaths(this.#location.dataDir).current;
    const before = await stampOf(path);
    if (this.#cached && before !== undefined && before === this.#cached.stamp) return this.#cached.key;
    const key = await loadSigningKey(this.#location);
    // Stamped before loading: a rotation racing the load shows as a change on the next call.
    this.#cached = { stamp: before ?? (await stampOf(path)) ?? '', key };
    return key;
  }
}

async function stampOf(path: string): Promise<string | undefined> {
  try {
    const st = await stat(path);
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

/** The public keys in this data directory's public/ (key id to SPKI PEM). */
export async function localPublicKeys(dataDir: string): Promise<Map<string, string>> {
  const { keys } = await readPublicDir(storePaths(dataDir).publicDir);
  const out = new Map<string, string>();
  for (const [id, { key }] of keys) out.set(id, key.export({ type: 'spki', format: 'pem' }).toString());
  return out;
}

/**
 * Adds a public key from elsewhere (the shared store) to public/, so that this data directory verifies
 * its tags. The key id is derived from the key again: a PEM whose key does not match its claimed id, or
 * that is not Ed25519, is refused (returns undefined).
 */
export async function addPublicKey(dataDir: string, pem: string, claimedId?: string): Promise<string | undefined> {
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({ key: pem, format: 'pem' });
  } catch {
    return undefined;
  }
  if (publicKey.asymmetricKeyType !== 'ed25519') return undefined;
  const keyId = keyIdOf(publicKey);
  if (claimedId !== undefined && claimedId !== keyId) return undefined;
  await recordPublicKey(storePaths(dataDir), { keyId, publicKey, privateKey: publicKey });
  return keyId;
}
