import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import {
  KEY_PREFIX,
  LAST_USED_GRANULARITY_MS,
  SCHEMA_VERSION,
  Store,
  StoreError,
  isWellFormedKey,
  monthOf,
  parseAuthorization,
  rateLimitHeaders,
  wwwAuthenticate,
  type StoreErrorCode,
} from '../src/store/index.js';
import { generateKey, hashKey } from '../src/store/keys.js';
import { monthBounds, quotaStateOf } from '../src/store/quota.js';

const dirs: string[] = [];
const stores: Store[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-store-'));
  dirs.push(dir);
  return dir;
}

function openStore(dataDir = tempDir(), limits = { protect: 10_000, verify: 50_000 }): Store {
  const store = Store.open({ dataDir, defaultProtectLimit: limits.protect, defaultVerifyLimit: limits.verify });
  stores.push(store);
  return store;
}

function storeErrorCode(fn: () => unknown): StoreErrorCode | 'no error' {
  try {
    fn();
  } catch (err) {
    if (err instanceof StoreError) return err.code;
    throw err;
  }
  return 'no error';
}

afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('keys', () => {
  it('have the prefix, 256 bits of base62 and are all different', () => {
    const keys = new Set(Array.from({ length: 2000 }, generateKey));
    expect(keys.size).toBe(2000);
    for (const k of keys) {
      expect(k).toMatch(/^om_live_[0-9A-Za-z]{43}$/);
      expect(isWellFormedKey(k)).toBe(true);
    }
    // 43 base62 characters carry 43 * log2(62) bits.
    expect(43 * Math.log2(62)).toBeGreaterThanOrEqual(256);
  });

  it('use every base62 character about equally (no modulo bias)', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 3000; i++) for (const c of generateKey().slice(KEY_PREFIX.length)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (3000 * 43) / 62;
    for (const n of counts.values()) expect(Math.abs(n - expected) / expected).toBeLessThan(0.15);
  });

  it.each([
    ['too short', 'om_live_abc'],
    ['too long', `${generateKey()}x`],
    ['other prefix', `om_test_${'a'.repeat(43)}`],
    ['not base62', `om_live_${'a'.repeat(42)}-`],
    ['the acceptance check\'s fake key', `om_live_${'x'.repeat(40)}`],
  ])('reject a malformed key: %s', (_name, key) => {
    expect(isWellFormedKey(key)).toBe(false);
  });
});

describe('parseAuthorization', () => {
  const key = generateKey();
  it.each([
    [undefined, { kind: 'missing' }],
    ['', { kind: 'missing' }],
    ['   ', { kind: 'missing' }],
    ['Bearer', { kind: 'missing' }],
    ['Bearer   ', { kind: 'missing' }],
    [`Bearer ${key}`, { kind: 'bearer', token: key }],
    [`bearer ${key}`, { kind: 'bearer', token: key }],
    [`BEARER \t${key}  `, { kind: 'bearer', token: key }],
    [`Basic ${key}`, { kind: 'other_scheme' }],
    [key, { kind: 'other_scheme' }],
    [`Bearer ${key} extra`, { kind: 'other_scheme' }],
    [`Bearer${key}`, { kind: 'other_scheme' }],
    [`Bearer ${'a'.repeat(600)}`, { kind: 'other_scheme' }],
  ])('%j', (header, expected) => {
    expect(parseAuthorization(header)).toEqual(expected);
  });

  it('builds RFC 6750 challenges', () => {
    expect(wwwAuthenticate('missing_api_key')).toBe('Bearer realm="optmark"');
    expect(wwwAuthenticate('invalid_api_key')).toBe('Bearer realm="optmark", error="invalid_token"');
    expect(wwwAuthenticate('plan_required')).toBe('Bearer realm="optmark", error="insufficient_scope"');
  });
});

describe('authenticate', () => {
  it('answers each failure with its code', () => {
    const store = openStore();
    store.createAccount('paid', 'pro');
    store.createAccount('free', 'free');
    const good = store.issueKey('paid').key;
    const freeKey = store.issueKey('free').key;
    const revoked = store.issueKey('paid');
    store.revokeKey(revoked.prefix);
    const cases: Array<[string, string | undefined, string]> = [
      ['no header', undefined, 'missing_api_key'],
      ['empty bearer', 'Bearer ', 'missing_api_key'],
      ['basic auth', 'Basic dXNlcjpwYXNz', 'invalid_api_key'],
      ['malformed key', 'Bearer om_live_short', 'invalid_api_key'],
      ['unknown key', `Bearer ${generateKey()}`, 'invalid_api_key'],
      ['revoked key', `Bearer ${revoked.key}`, 'invalid_api_key'],
      ['free plan', `Bearer ${freeKey}`, 'plan_required'],
      ['good key', `Bearer ${good}`, 'ok'],
    ];
    for (const [name, header, code] of cases) {
      const r = store.authenticate(header);
      expect(r.ok ? 'ok' : r.code, name).toBe(code);
      if (!r.ok) {
        expect(r.message.length, name).toBeGreaterThan(0);
        expect(r.message, name).not.toContain(KEY_PREFIX);
      }
    }
  });

  it('returns the account with effective limits and the key id', () => {
    const store = openStore(undefined, { protect: 7, verify: 9 });
    store.createAccount('acme', 'lifetime');
    const { key, id } = store.issueKey('acme');
    const r = store.authenticate(`Bearer ${key}`);
    expect(r).toMatchObject({ ok: true, keyId: id, account: { name: 'acme', plan: 'lifetime', protectLimit: 7, verifyLimit: 9 } });
  });

  it('applies plan changes and revocation on the very next call', () => {
    const store = openStore();
    store.createAccount('acme', 'pro');
    const { key, prefix } = store.issueKey('acme');
    const header = `Bearer ${key}`;
    expect(store.authenticate(header).ok).toBe(true);
    store.setPlan('acme', 'free');
    expect(store.authenticate(header)).toMatchObject({ ok: false, code: 'plan_required' });
    store.setPlan('acme', 'lifetime');
    expect(store.authenticate(header).ok).toBe(true);
    expect(store.revokeKey(prefix)).toEqual({ prefix, account: 'acme', alreadyRevoked: false });
    expect(store.authenticate(header)).toMatchObject({ ok: false, code: 'invalid_api_key' });
    expect(store.revokeKey(prefix).alreadyRevoked).toBe(true);
  });

  it(`writes last-used at most once per ${LAST_USED_GRANULARITY_MS / 1000} s`, () => {
    const store = openStore();
    store.createAccount('acme', 'pro');
    const { key } = store.issueKey('acme');
    const lastUsed = () => store.listKeys('acme')[0]!.lastUsedAt;
    expect(lastUsed()).toBeNull();
    const t0 = new Date('2026-03-10T12:00:00.000Z');
    store.authenticate(`Bearer ${key}`, t0);
    expect(lastUsed()).toBe(t0.toISOString());
    store.authenticate(`Bearer ${key}`, new Date(t0.getTime() + LAST_USED_GRANULARITY_MS - 1));
    expect(lastUsed()).toBe(t0.toISOString());
    const t1 = new Date(t0.getTime() + LAST_USED_GRANULARITY_MS + 1);
    store.authenticate(`Bearer ${key}`, t1);
    expect(lastUsed()).toBe(t1.toISOString());
  });
});

describe('reserve, commit, refund', () => {
  function account(store: Store, limits: { protect?: number; verify?: number } = {}): number {
    const a = store.createAccount(`a${Math.random().toString(36).slice(2, 10)}`, 'pro');
    return store.setLimits(a.name, limits).id;
  }

  it('allows exactly the limit, separately per operation', () => {
    const store = openStore();
    const id = account(store, { protect: 3, verify: 2 });
    const outcomes = (op: 'protect' | 'verify', n: number) => Array.from({ length: n }, () => store.reserve(id, op).ok);
    expect(outcomes('protect', 5)).toEqual([true, true, true, false, false]);
    expect(outcomes('verify', 3)).toEqual([true, true, false]);
  });

  it('reports the state after the reservation and when over the limit', () => {
    const store = openStore();
    const id = account(store, { protect: 2 });
    const now = new Date('2026-02-27T00:00:00.000Z');
    const first = store.reserve(id, 'protect', now);
    expect(first.state).toEqual({ operation: 'protect', limit: 2, used: 1, remaining: 1, resetSeconds: 2 * 86_400, windowSeconds: 28 * 86_400 });
    store.reserve(id, 'protect', now);
    const over = store.reserve(id, 'protect', now);
    expect(over).toEqual({ ok: false, state: { operation: 'protect', limit: 2, used: 2, remaining: 0, resetSeconds: 2 * 86_400, windowSeconds: 28 * 86_400 } });
  });

  it('refund gives the unit back once; commit keeps it; both are idempotent', () => {
    const store = openStore();
    const id = account(store, { protect: 5 });
    const used = () => store.quotaState(id, 'protect').used;
    const a = store.reserve(id, 'protect');
    const b = store.reserve(id, 'protect');
    if (!a.ok || !b.ok) throw new Error('reserve failed');
    expect(used()).toBe(2);
    store.refund(a.reservation);
    store.refund(a.reservation);
    store.commit(a.reservation);
    expect(used()).toBe(1);
    store.commit(b.reservation);
    store.refund(b.reservation);
    store.commit(b.reservation);
    expect(used()).toBe(1);
  });

  it('a refund returns the unit to the month it was taken from', () => {
    const store = openStore();
    const id = account(store, { verify: 1 });
    const jan = new Date('2026-01-31T23:59:59.500Z');
    const feb = new Date('2026-02-01T00:00:00.000Z');
    const r = store.reserve(id, 'verify', jan);
    if (!r.ok) throw new Error('reserve failed');
    expect(r.reservation.month).toBe('2026-01');
    expect(r.state.resetSeconds).toBe(1);
    expect(store.reserve(id, 'verify', jan).ok).toBe(false);
    expect(store.reserve(id, 'verify', feb).ok).toBe(true);
    store.refund(r.reservation);
    expect(store.usage(store.listAccounts().find((a) => a.id === id)!.name, '2026-01').verify.used).toBe(0);
    expect(store.quotaState(id, 'verify', feb).used).toBe(1);
  });

  it('a limit of 0 allows nothing; new limits apply to the next reserve', () => {
    const store = openStore();
    const id = account(store, { protect: 0 });
    const name = store.listAccounts().find((a) => a.id === id)!.name;
    expect(store.reserve(id, 'protect')).toMatchObject({ ok: false, state: { limit: 0, used: 0, remaining: 0 } });
    store.setLimits(name, { protect: 1 });
    expect(store.reserve(id, 'protect').ok).toBe(true);
    expect(store.reserve(id, 'protect').ok).toBe(false);
    store.setLimits(name, { protect: null });
    expect(store.reserve(id, 'protect').state.limit).toBe(10_000);
  });

  it('keeps counts across a close and reopen', () => {
    const dir = tempDir();
    const first = openStore(dir);
    const id = account(first, { protect: 4 });
    for (let i = 0; i < 3; i++) first.reserve(id, 'protect');
    first.close();
    const second = openStore(dir);
    expect(second.quotaState(id, 'protect').used).toBe(3);
    expect(second.reserve(id, 'protect').ok).toBe(true);
    expect(second.reserve(id, 'protect').ok).toBe(false);
  });

  it('reserving for an unknown account id throws unknown_account', () => {
    const store = openStore();
    expect(storeErrorCode(() => store.reserve(999, 'protect'))).toBe('unknown_account');
  });
});

describe('quota windows and headers', () => {
  it.each([
    ['2026-01-15T00:00:00.000Z', '2026-01', 31],
    ['2026-02-28T23:59:59.999Z', '2026-02', 28],
    ['2028-02-10T10:00:00.000Z', '2028-02', 29],
    ['2026-12-31T23:00:00.000Z', '2026-12', 31],
  ])('%s is in %s of %d days', (iso, month, days) => {
    const now = new Date(iso);
    expect(monthOf(now)).toBe(month);
    const { start, end } = monthBounds(month);
    expect((end - start) / 86_400_000).toBe(days);
    expect(now.getTime()).toBeGreaterThanOrEqual(start);
    expect(now.getTime()).toBeLessThan(end);
  });

  it('formats the draft-ietf-httpapi-ratelimit-headers fields', () => {
    const state = quotaStateOf('protect', 10_000, 10, '2026-05', new Date('2026-05-31T00:00:00.000Z'));
    expect(rateLimitHeaders(state)).toEqual({
      'RateLimit-Policy': '"protect";q=10000;w=2678400',
      RateLimit: '"protect";r=9990;t=86400',
    });
    const over = quotaStateOf('verify', 5, 7, '2026-05', new Date('2026-05-31T23:59:59.200Z'));
    expect(rateLimitHeaders(over).RateLimit).toBe('"verify";r=0;t=1');
  });
});

describe('operator side', () => {
  it('raises typed errors for operator mistakes', () => {
    const store = openStore();
    store.createAccount('acme', 'pro');
    const cases: Array<[string, () => unknown, StoreErrorCode]> = [
      ['duplicate name', () => store.createAccount('acme', 'pro'), 'duplicate_account'],
      ['duplicate name, other case', () => store.createAccount('ACME', 'free'), 'duplicate_account'],
      ['bad name', () => store.createAccount('has space', 'pro'), 'invalid_account_name'],
      ['empty name', () => store.createAccount('', 'pro'), 'invalid_account_name'],
      ['bad plan', () => store.createAccount('other', 'gold' as 'pro'), 'invalid_plan'],
      ['bad plan change', () => store.setPlan('acme', 'gold' as 'pro'), 'invalid_plan'],
      ['unknown account', () => store.setPlan('nobody', 'pro'), 'unknown_account'],
      ['unknown account keys', () => store.issueKey('nobody'), 'unknown_account'],
      ['negative limit', () => store.setLimits('acme', { protect: -1 }), 'invalid_limit'],
      ['fractional limit', () => store.setLimits('acme', { verify: 1.5 }), 'invalid_limit'],
      ['bad month', () => store.usage('acme', '2026-5'), 'invalid_month'],
      ['short prefix', () => store.revokeKey('om_live_ab'), 'key_prefix_too_short'],
      ['not a key prefix', () => store.revokeKey('sk_live_abcdefgh'), 'unknown_key'],
      ['unknown prefix', () => store.revokeKey('om_live_ZZZZZZZZ'), 'unknown_key'],
      ['unknown whole key', () => store.revokeKey(generateKey()), 'unknown_key'],
    ];
    for (const [name, fn, code] of cases) expect(storeErrorCode(fn), name).toBe(code);
  });

  it('revokes by 12-character prefix, display prefix or whole key, and refuses an ambiguous prefix', () => {
    const store = openStore();
    store.createAccount('acme', 'pro');
    const a = store.issueKey('acme');
    const b = store.issueKey('acme');
    expect(store.revokeKey(a.key.slice(0, 12)).prefix).toBe(a.prefix);
    expect(store.revokeKey(b.key).prefix).toBe(b.prefix);
    // Two live keys sharing a 12-character prefix: forge the second row's prefix to force the collision.
    const c = store.issueKey('acme');
    const d = store.issueKey('acme');
    const db = new Database(store.file);
    db.prepare('UPDATE api_keys SET prefix = ? WHERE id = ?').run(`${c.prefix.slice(0, 12)}zzzz`, d.id);
    db.close();
    expect(storeErrorCode(() => store.revokeKey(c.prefix.slice(0, 12)))).toBe('ambiguous_key_prefix');
    expect(store.revokeKey(c.prefix).prefix).toBe(c.prefix);
    // With one of the two revoked, the shorter prefix names the live one unambiguously.
    expect(store.revokeKey(c.prefix.slice(0, 12)).prefix).toBe(`${c.prefix.slice(0, 12)}zzzz`);
  });

  it('lists accounts and keys without the keys themselves', () => {
    const store = openStore(undefined, { protect: 3, verify: 4 });
    store.createAccount('b', 'free');
    store.createAccount('a', 'pro');
    store.setLimits('a', { verify: 40 });
    expect(store.listAccounts().map((a) => [a.name, a.plan, a.protectLimit, a.verifyLimit])).toEqual([
      ['a', 'pro', 3, 40],
      ['b', 'free', 3, 4],
    ]);
    const { key, prefix } = store.issueKey('a');
    const listed = store.listKeys('a');
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ prefix, lastUsedAt: null, revokedAt: null });
    expect(JSON.stringify(listed)).not.toContain(key.slice(prefix.length));
  });

  it('bootstraps one pro account with one working key, only on an empty store', () => {
    const dir = tempDir();
    const store = openStore(dir);
    const boot = store.bootstrapIfEmpty();
    expect(boot?.account).toMatchObject({ name: 'default', plan: 'pro' });
    expect(store.authenticate(`Bearer ${boot!.key}`).ok).toBe(true);
    expect(store.bootstrapIfEmpty()).toBeUndefined();
    expect(openStore(dir).bootstrapIfEmpty()).toBeUndefined();
    const other = openStore();
    other.createAccount('someone', 'free');
    expect(other.bootstrapIfEmpty()).toBeUndefined();
  });
});

describe('database file', () => {
  it('is ${dataDir}/optmark.db in WAL mode with the current schema version', () => {
    const dir = tempDir();
    openStore(dir);
    const db = new Database(join(dir, 'optmark.db'), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
  });

  it('regression: reservations checkpoint and rewind the WAL, which stays near 1000 pages however many there are', () => {
    // Reservations were read with .get(), whose commit skips SQLite's WAL hook: the WAL grew by a page
    // per request, without bound, until some other write checkpointed all of it at once.
    const dir = tempDir();
    const store = openStore(dir, { protect: 1_000_000, verify: 0 });
    const { id } = store.createAccount('acme', 'pro');
    for (let i = 0; i < 4000; i++) {
      const r = store.reserve(id, 'protect');
      if (!r.ok) throw new Error('refused');
      store.commit(r.reservation);
    }
    const wal = readFileSync(join(dir, 'optmark.db-wal'));
    const pageSize = wal.readUInt32BE(8);
    expect(wal.length).toBeLessThanOrEqual(32 + 1100 * (pageSize + 24));
    expect(wal.readUInt32BE(12)).toBeGreaterThanOrEqual(3); // rewound at least 3 times
    expect(store.usage('acme').protect.used).toBe(4000);
  });

  it('stores no plain key, only its SHA-256', () => {
    const dir = tempDir();
    const store = openStore(dir);
    store.createAccount('acme', 'pro');
    const keys = Array.from({ length: 5 }, () => store.issueKey('acme').key);
    store.authenticate(`Bearer ${keys[0]}`);
    const read = () => Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f))));
    const bytes = read();
    for (const key of keys) {
      expect(bytes.includes(key)).toBe(false);
      expect(bytes.includes(key.slice(16))).toBe(false);
    }
    expect(bytes.includes(hashKey(keys[0]!))).toBe(true);
    store.close();
    const checkpointed = read();
    for (const key of keys) expect(checkpointed.includes(key)).toBe(false);
  });

  it('refuses a database from a newer optmark', () => {
    const dir = tempDir();
    openStore(dir).close();
    const db = new Database(join(dir, 'optmark.db'));
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(storeErrorCode(() => openStore(dir))).toBe('schema_too_new');
  });
});
