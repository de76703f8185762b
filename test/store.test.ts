import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  KEY_PREFIX,
  LAST_USED_GRANULARITY_MS,
  LEASE_MS,
  PG_SCHEMA_VERSION,
  SCHEMA_VERSION,
  StoreError,
  isWellFormedKey,
  monthOf,
  parseAuthorization,
  rateLimitHeaders,
  wwwAuthenticate,
  type Store,
  type StoreErrorCode,
} from '../src/store/index.js';
import { generateKey, hashKey } from '../src/store/keys.js';
import { monthBounds, quotaStateOf } from '../src/store/quota.js';
import { ORPHAN_OWNERS, ownerGaps } from '../src/store/postgres/engine.js';
import { Relay } from './helpers/relay.js';
import { waitFor } from './helpers/server.js';
import { ENGINES, StoreHarness, TEST_DATABASE_URL } from './helpers/stores.js';

async function storeErrorCode(fn: () => unknown): Promise<StoreErrorCode | 'no error'> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof StoreError) return err.code;
    throw err;
  }
  return 'no error';
}

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
    ["the acceptance check's fake key", `om_live_${'x'.repeat(40)}`],
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

// ── the same suite against both engines ─────────────────────────────────────────────────────────

describe.each(ENGINES)('store on %s', (engine) => {
  const h = new StoreHarness(engine);
  beforeAll(() => h.setup());
  afterEach(() => h.closeAll());
  afterAll(() => h.teardown());
  const openStore = (dataDir?: string, limits?: { protect: number; verify: number }) => h.open(dataDir, limits);

  describe('authenticate', () => {
    it('answers each failure with its code', async () => {
      const store = await openStore();
      await store.createAccount('paid', 'pro');
      await store.createAccount('free', 'free');
      const good = (await store.issueKey('paid')).key;
      const freeKey = (await store.issueKey('free')).key;
      const revoked = await store.issueKey('paid');
      await store.revokeKey(revoked.prefix);
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
        const r = await store.authenticate(header);
        expect(r.ok ? 'ok' : r.code, name).toBe(code);
        if (!r.ok) {
          expect(r.message.length, name).toBeGreaterThan(0);
          expect(r.message, name).not.toContain(KEY_PREFIX);
        }
      }
    });

    it('returns the account with effective limits and the key id', async () => {
      const store = await openStore(undefined, { protect: 7, verify: 9 });
      await store.createAccount('acme', 'lifetime');
      const { key, id } = await store.issueKey('acme');
      const r = await store.authenticate(`Bearer ${key}`);
      expect(r).toMatchObject({ ok: true, keyId: id, account: { name: 'acme', plan: 'lifetime', protectLimit: 7, verifyLimit: 9 } });
    });

    it('applies plan changes and revocation made through the same store on the very next call', async () => {
      const store = await openStore();
      await store.createAccount('acme', 'pro');
      const { key, prefix } = await store.issueKey('acme');
      const header = `Bearer ${key}`;
      expect((await store.authenticate(header)).ok).toBe(true);
      await store.setPlan('acme', 'free');
      expect(await store.authenticate(header)).toMatchObject({ ok: false, code: 'plan_required' });
      await store.setPlan('acme', 'lifetime');
      expect((await store.authenticate(header)).ok).toBe(true);
      expect(await store.revokeKey(prefix)).toEqual({ prefix, account: 'acme', alreadyRevoked: false });
      expect(await store.authenticate(header)).toMatchObject({ ok: false, code: 'invalid_api_key' });
      expect((await store.revokeKey(prefix)).alreadyRevoked).toBe(true);
    });

    it('a key issued or revoked through another instance works or stops within the cache bound', async () => {
      const dir = h.tempDir();
      const server = await openStore(dir);
      const operator = await openStore(dir); // another instance's CLI, on the same store
      await operator.createAccount('acme', 'pro');
      const { key, prefix } = await operator.issueKey('acme');
      // A new key is never refused for having been unknown a moment ago: misses are not cached.
      expect(await server.authenticate(`Bearer ${generateKey()}`)).toMatchObject({ ok: false });
      expect((await server.authenticate(`Bearer ${key}`)).ok).toBe(true);
      await operator.revokeKey(prefix);
      // SQLite reads every time; PostgreSQL may answer from its cache until the entry is 2 s old.
      const deadline = Date.now() + 5000;
      let refused = false;
      while (!refused && Date.now() < deadline) {
        refused = !(await server.authenticate(`Bearer ${key}`)).ok;
        if (!refused) await new Promise((r) => setTimeout(r, 100));
      }
      expect(refused).toBe(true);
    });

    it(`writes last-used at most once per ${LAST_USED_GRANULARITY_MS / 1000} s, in batches`, async () => {
      const store = await openStore();
      await store.createAccount('acme', 'pro');
      const { key } = await store.issueKey('acme');
      const lastUsed = async () => (await store.listKeys('acme'))[0]!.lastUsedAt;
      expect(await lastUsed()).toBeNull();
      const t0 = new Date('2026-03-10T12:00:00.000Z');
      await store.authenticate(`Bearer ${key}`, t0);
      expect(await lastUsed()).toBe(t0.toISOString());
      await store.authenticate(`Bearer ${key}`, new Date(t0.getTime() + LAST_USED_GRANULARITY_MS - 1));
      expect(await lastUsed()).toBe(t0.toISOString());
      const t1 = new Date(t0.getTime() + LAST_USED_GRANULARITY_MS + 1);
      await store.authenticate(`Bearer ${key}`, t1);
      expect(await lastUsed()).toBe(t1.toISOString());
    });

    it('writes last-used once for many uses (no write per request)', async () => {
      const dir = h.tempDir();
      const store = await openStore(dir);
      const observer = await openStore(dir);
      await store.createAccount('acme', 'pro');
      const { key } = await store.issueKey('acme');
      for (let i = 0; i < 50; i++) expect((await store.authenticate(`Bearer ${key}`)).ok).toBe(true);
      // Not written yet: another instance sees nothing until the batch goes out (every 10 s, at close).
      expect((await observer.listKeys('acme'))[0]!.lastUsedAt).toBeNull();
      await store.close();
      expect((await observer.listKeys('acme'))[0]!.lastUsedAt).not.toBeNull();
    });
  });

  describe('reserve, commit, refund', () => {
    async function account(store: Store, limits: { protect?: number; verify?: number } = {}): Promise<number> {
      const a = await store.createAccount(`a${Math.random().toString(36).slice(2, 10)}`, 'pro');
      return (await store.setLimits(a.name, limits)).id;
    }
    async function take(store: Store, id: number, op: 'protect' | 'verify', n: number): Promise<boolean[]> {
      const out: boolean[] = [];
      for (let i = 0; i < n; i++) {
        const r = await store.reserve(id, op);
        if (r.ok) await store.commit(r.reservation);
        out.push(r.ok);
      }
      return out;
    }

    it('allows exactly the limit, separately per operation', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 3, verify: 2 });
      expect(await take(store, id, 'protect', 5)).toEqual([true, true, true, false, false]);
      expect(await take(store, id, 'verify', 3)).toEqual([true, true, false]);
    });

    it('allows exactly the limit to concurrent callers on several instances', async () => {
      const dir = h.tempDir();
      const stores = [await openStore(dir), await openStore(dir), await openStore(dir)];
      const id = await account(stores[0]!, { protect: 40 });
      const results = await Promise.all(
        Array.from({ length: 120 }, async (_, i) => {
          const s = stores[i % 3]!;
          const r = await s.reserve(id, 'protect');
          if (r.ok) await s.commit(r.reservation);
          return r.ok;
        }),
      );
      expect(results.filter(Boolean)).toHaveLength(40);
      expect((await stores[1]!.quotaState(id, 'protect')).used).toBe(40);
    });

    it('reports the state after the reservation and when over the limit', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 2 });
      const now = new Date('2026-02-27T00:00:00.000Z');
      const first = await store.reserve(id, 'protect', now);
      expect(first.state).toEqual({ operation: 'protect', limit: 2, used: 1, remaining: 1, resetSeconds: 2 * 86_400, windowSeconds: 28 * 86_400 });
      await store.reserve(id, 'protect', now);
      const over = await store.reserve(id, 'protect', now);
      expect(over).toEqual({
        ok: false,
        state: { operation: 'protect', limit: 2, used: 2, remaining: 0, resetSeconds: 2 * 86_400, windowSeconds: 28 * 86_400 },
      });
    });

    it('commit and refund answer the counter after them', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 5 });
      const a = await store.reserve(id, 'protect');
      const b = await store.reserve(id, 'protect');
      if (!a.ok || !b.ok) throw new Error('reserve failed');
      expect((await store.commit(a.reservation))?.used).toBe(2);
      expect((await store.refund(b.reservation))?.remaining).toBe(4);
    });

    it('refund gives the unit back once; commit keeps it; both are idempotent; refund after commit gives it back once', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 5 });
      const used = async () => (await store.quotaState(id, 'protect')).used;
      const a = await store.reserve(id, 'protect');
      const b = await store.reserve(id, 'protect');
      const c = await store.reserve(id, 'protect');
      if (!a.ok || !b.ok || !c.ok) throw new Error('reserve failed');
      expect(await used()).toBe(3);
      await store.refund(a.reservation);
      await store.refund(a.reservation);
      await store.commit(a.reservation);
      expect(await used()).toBe(2);
      await store.commit(b.reservation);
      await store.commit(b.reservation);
      expect(await used()).toBe(2);
      // A success that could not be delivered after its commit: given back, once.
      await store.refund(b.reservation);
      await store.refund(b.reservation);
      await store.commit(b.reservation);
      expect(await used()).toBe(1);
      await store.commit(c.reservation);
      expect(await used()).toBe(1);
      expect((await store.usage((await store.listAccounts()).find((x) => x.id === id)!.name)).held).toEqual({ protect: 0, verify: 0 });
    });

    it('commit calls onSent once, with the unit on its way; never for a unit given back', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 5 });
      const name = (await store.listAccounts()).find((x) => x.id === id)!.name;
      const a = await store.reserve(id, 'protect');
      const b = await store.reserve(id, 'protect');
      if (!a.ok || !b.ok) throw new Error('reserve failed');
      const calls: string[] = [];
      const state = await store.commit(a.reservation, undefined, () => calls.push('a'));
      expect(calls).toEqual(['a']);
      expect(state?.used).toBe(2);
      // Committed already: the answer may go (idempotent), the counter does not move.
      await store.commit(a.reservation, undefined, () => calls.push('a again'));
      expect(calls).toEqual(['a', 'a again']);
      await store.refund(b.reservation);
      expect(await storeErrorCode(() => store.commit(b.reservation, undefined, () => calls.push('b')))).toBe('reservation_lost');
      expect(calls).toEqual(['a', 'a again']);
      const u = await store.usage(name);
      expect([u.protect.used, u.held.protect]).toEqual([1, 0]);
    });

    it('a refund returns the unit to the month it was taken from', async () => {
      const store = await openStore();
      const id = await account(store, { verify: 1 });
      const jan = new Date('2026-01-31T23:59:59.500Z');
      const feb = new Date('2026-02-01T00:00:00.000Z');
      const r = await store.reserve(id, 'verify', jan);
      if (!r.ok) throw new Error('reserve failed');
      expect(r.reservation.month).toBe('2026-01');
      expect(r.state.resetSeconds).toBe(1);
      expect((await store.reserve(id, 'verify', jan)).ok).toBe(false);
      expect((await store.reserve(id, 'verify', feb)).ok).toBe(true);
      await store.refund(r.reservation, feb);
      const name = (await store.listAccounts()).find((a) => a.id === id)!.name;
      expect((await store.usage(name, '2026-01')).verify.used).toBe(0);
      expect((await store.quotaState(id, 'verify', feb)).used).toBe(1);
    });

    it('a limit of 0 allows nothing; new limits apply to the next reserve', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 0 });
      const name = (await store.listAccounts()).find((a) => a.id === id)!.name;
      expect(await store.reserve(id, 'protect')).toMatchObject({ ok: false, state: { limit: 0, used: 0, remaining: 0 } });
      await store.setLimits(name, { protect: 1 });
      expect((await store.reserve(id, 'protect')).ok).toBe(true);
      expect((await store.reserve(id, 'protect')).ok).toBe(false);
      await store.setLimits(name, { protect: null });
      expect((await store.reserve(id, 'protect')).state.limit).toBe(10_000);
    });

    it('keeps committed counts across a close and reopen, and gives back what was held at close', async () => {
      const dir = h.tempDir();
      const first = await openStore(dir);
      const id = await account(first, { protect: 4 });
      expect(await take(first, id, 'protect', 3)).toEqual([true, true, true]);
      expect((await first.reserve(id, 'protect')).ok).toBe(true); // held, never answered
      await first.close();
      const second = await openStore(dir);
      expect((await second.quotaState(id, 'protect')).used).toBe(3);
      expect((await second.reserve(id, 'protect')).ok).toBe(true);
      expect((await second.reserve(id, 'protect')).ok).toBe(false);
    });

    it('reserving for an unknown account id throws unknown_account', async () => {
      const store = await openStore();
      expect(await storeErrorCode(() => store.reserve(999, 'protect'))).toBe('unknown_account');
    });

    it('concurrent reserves (one batch on PostgreSQL): exactly each limit, to the first callers, each seeing the counter as if alone', async () => {
      const store = await openStore();
      const a = await account(store, { protect: 10, verify: 2 });
      const b = await account(store, { protect: 3 });
      // Interleaved: a/protect, a/protect, b/protect, a/verify, ... all issued in one turn.
      const calls = Array.from({ length: 48 }, (_, i) => ([a, a, b, a] as const)[i % 4]!).map((id, i) => ({
        id,
        op: i % 4 === 3 ? ('verify' as const) : ('protect' as const),
      }));
      const results = await Promise.all(calls.map((c) => store.reserve(c.id, c.op)));
      const stream = (id: number, op: 'protect' | 'verify') => results.filter((_, i) => calls[i]!.id === id && calls[i]!.op === op);
      const shape = (rs: typeof results) => rs.map((r) => `${r.ok ? 'ok' : 'no'} ${r.state.used}/${r.state.remaining}`);
      const expected = (n: number, limit: number) => Array.from({ length: n }, (_, i) => (i < limit ? `ok ${i + 1}/${limit - i - 1}` : `no ${limit}/0`));
      expect(shape(stream(a, 'protect'))).toEqual(expected(24, 10));
      expect(shape(stream(b, 'protect'))).toEqual(expected(12, 3));
      expect(shape(stream(a, 'verify'))).toEqual(expected(12, 2));
      // Commits and refunds of one turn, a refund asked twice among them, and a commit of a refunded unit.
      const granted = results.flatMap((r) => (r.ok ? [r.reservation] : []));
      expect(granted).toHaveLength(15);
      const mine = granted.filter((r) => r.accountId === a && r.operation === 'protect');
      const [gone, ...rest] = mine;
      const answers = await Promise.all([
        store.refund(gone!),
        store.refund(gone!),
        ...rest.map((r, i) => (i % 3 === 0 ? store.refund(r) : store.commit(r))),
        store.commit(gone!),
        ...granted.filter((r) => !mine.includes(r)).map((r) => store.commit(r)),
      ]);
      expect(answers[1]).toBeUndefined(); // the second refund of one unit gives nothing back
      expect(answers[2 + rest.length]).toBeUndefined(); // nor does the commit after it
      const refunded = 1 + rest.filter((_, i) => i % 3 === 0).length; // 1 + 3
      expect((await store.quotaState(a, 'protect')).used).toBe(10 - refunded);
      expect((await store.quotaState(b, 'protect')).used).toBe(3);
      expect((await store.quotaState(a, 'verify')).used).toBe(2);
      const names = await store.listAccounts();
      for (const id of [a, b]) expect((await store.usage(names.find((x) => x.id === id)!.name)).held).toEqual({ protect: 0, verify: 0 });
      // Exactly the units given back can be taken again.
      expect(shape(await Promise.all(Array.from({ length: refunded + 2 }, () => store.reserve(a, 'protect'))))).toEqual(
        Array.from({ length: refunded + 2 }, (_, i) => (i < refunded ? `ok ${10 - refunded + i + 1}/${refunded - i - 1}` : 'no 10/0')),
      );
    });

    it('concurrent commits across a month turn each answer their own month', async () => {
      const store = await openStore();
      const id = await account(store, { verify: 5 });
      const jan = new Date('2026-01-31T23:59:59.000Z');
      const feb = new Date('2026-02-01T00:00:01.000Z');
      const [x, y] = await Promise.all([store.reserve(id, 'verify', jan), store.reserve(id, 'verify', jan)]);
      if (!x?.ok || !y?.ok) throw new Error('reserve failed');
      const [cx, cy] = await Promise.all([store.commit(x.reservation, jan), store.commit(y.reservation, feb)]);
      expect([cx?.used, cx?.resetSeconds, cy?.used, cy?.remaining]).toEqual([2, 1, 0, 5]);
      const name = (await store.listAccounts()).find((a) => a.id === id)!.name;
      expect((await store.usage(name, '2026-01')).verify.used).toBe(2);
      expect((await store.usage(name, '2026-01')).held.verify).toBe(0);
    });

    it('an unknown account among concurrent reserves fails only its own call', async () => {
      const store = await openStore();
      const id = await account(store, { protect: 2 });
      const out = await Promise.all([store.reserve(id, 'protect'), store.reserve(999_999, 'protect').catch((e: unknown) => e), store.reserve(id, 'protect')]);
      expect(out[0]).toMatchObject({ ok: true, state: { used: 1 } });
      expect(out[1]).toBeInstanceOf(StoreError);
      expect((out[1] as StoreError).code).toBe('unknown_account');
      expect(out[2]).toMatchObject({ ok: true, state: { used: 2 } });
    });
  });

  describe('reservations of dead instances', () => {
    /** Two instances on one store, and an account with a protect limit of 10. */
    async function twoInstances() {
      const dir = h.tempDir();
      const stalled = await openStore(dir);
      const other = await openStore(dir);
      const { id, name } = await stalled.createAccount('acme', 'pro');
      await stalled.setLimits(name, { protect: 10 });
      return { stalled, other, id, name };
    }

    it('units held by an instance whose lease ran out are given back once; its commit then fails, its refund gives nothing twice', async () => {
      const { stalled, other, id, name } = await twoInstances();
      const held = [await stalled.reserve(id, 'protect'), await stalled.reserve(id, 'protect'), await stalled.reserve(id, 'protect')];
      const done = await stalled.reserve(id, 'protect');
      if (!done.ok) throw new Error('reserve failed');
      await stalled.commit(done.reservation);
      expect((await other.usage(name)).held.protect).toBe(3);
      expect((await other.quotaState(id, 'protect')).used).toBe(4);
      // Nothing is given back while the lease runs.
      expect(await other.reconcile()).toBe(0);
      const later = new Date(Date.now() + LEASE_MS + 1000);
      expect(await other.reconcile(later)).toBe(3);
      expect(await other.reconcile(later)).toBe(0);
      expect((await other.quotaState(id, 'protect')).used).toBe(1);
      const [a, b] = held;
      if (!a?.ok || !b?.ok) throw new Error('reserve failed');
      expect(await storeErrorCode(() => stalled.commit(a.reservation))).toBe('reservation_lost');
      await stalled.refund(b.reservation);
      expect((await other.quotaState(id, 'protect')).used).toBe(1);
    });

    it('regression: a reservation lost with the lease fails at commit, and a newer one of the same counter commits', async () => {
      // Holds were a count per owner and counter: after the instance took its lease back and reserved again,
      // the lost reservation's commit took the newer one's unit (answered, not counted) and the newer one
      // failed reservation_lost (counted, not answered).
      const { stalled, other, id, name } = await twoInstances();
      const lost = await stalled.reserve(id, 'protect');
      if (!lost.ok) throw new Error('reserve failed');
      expect(await other.reconcile(new Date(Date.now() + LEASE_MS + 1000))).toBe(1);
      // Its heartbeat registers the same owner id again; the next reservation is held under it.
      await h.raw(stalled, 'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        stalled.instanceId,
        'elsewhere',
        1,
        '',
        Date.now() + LEASE_MS,
      ]);
      const newer = await stalled.reserve(id, 'protect');
      if (!newer.ok) throw new Error('reserve failed');
      expect(await storeErrorCode(() => stalled.commit(lost.reservation))).toBe('reservation_lost');
      expect((await stalled.commit(newer.reservation))?.used).toBe(1);
      const u = await other.usage(name);
      expect([u.protect.used, u.held.protect]).toEqual([1, 0]);
      // The lost one's refund gives nothing (its unit went back with the lease).
      await stalled.refund(lost.reservation);
      expect((await other.quotaState(id, 'protect')).used).toBe(1);
    });

    it('a store of the schema before hold rows is migrated; in a rolling upgrade each unit of either version goes back once', async () => {
      const dir = h.tempDir();
      const first = await openStore(dir);
      const { id, name } = await first.createAccount('acme', 'pro');
      await first.setLimits(name, { protect: 10 });
      await first.close();
      // The data directory or schema as the version before left it (migrations only ever add).
      await h.raw(first, 'DROP TABLE reservations');
      await dropSignalLayers(h, first);
      await h.raw(first, engine === 'sqlite' ? 'PRAGMA user_version = 4' : 'DELETE FROM optmark_schema WHERE version >= 4');
      // An instance of that version runs on: 3 units committed, 2 held (a count in \`holds\`).
      const month = monthOf(new Date());
      await h.raw(first, 'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        'old-instance',
        'elsewhere',
        1,
        '',
        Date.now() + LEASE_MS,
      ]);
      await h.raw(first, 'INSERT INTO usage_counters (account_id, month, operation, used) VALUES ($1, $2, $3, $4)', [id, month, 'protect', 5]);
      await h.raw(first, 'INSERT INTO holds (owner, account_id, month, operation, n) VALUES ($1, $2, $3, $4, $5)', ['old-instance', id, month, 'protect', 2]);
      const a = await openStore(dir);
      const b = await openStore(dir);
      const version = engine === 'sqlite' ? 'PRAGMA user_version' : 'SELECT max(version) AS user_version FROM optmark_schema';
      expect(Number((await h.raw(a, version))[0]!.user_version)).toBe(engine === 'sqlite' ? SCHEMA_VERSION : PG_SCHEMA_VERSION);
      expect((await a.usage(name)).held.protect).toBe(2);
      await h.raw(a, "UPDATE holds SET n = n - 1 WHERE owner = 'old-instance'"); // its commit
      const done = await a.reserve(id, 'protect');
      if (!done.ok) throw new Error('reserve failed');
      expect((await a.commit(done.reservation))?.used).toBe(6);
      const held = await a.reserve(id, 'protect');
      if (!held.ok) throw new Error('reserve failed');
      expect((await b.usage(name)).held.protect).toBe(2);
      // The old instance takes the new one for dead and gives back what it knows of (its \`holds\` only):
      // the new one's hold row, ownerless, is given back by an upgraded instance.
      await h.raw(a, 'DELETE FROM owners WHERE id = $1', [a.instanceId]);
      await h.raw(a, 'DELETE FROM holds WHERE owner = $1', [a.instanceId]);
      expect(await b.reconcile()).toBe(1);
      expect(await storeErrorCode(() => a.commit(held.reservation))).toBe('reservation_lost');
      // The old instance dies: its held unit goes back once.
      await h.raw(a, "UPDATE owners SET expires_at = 0 WHERE id = 'old-instance'");
      expect(await b.reconcile()).toBe(1);
      expect(await b.reconcile()).toBe(0);
      const u = await b.usage(name);
      expect([u.protect.used, u.held.protect]).toEqual([5, 0]);
    });

    it('hold rows of unregistered owners below, between and above the registered ones, several to a gap, go back once each', async () => {
      // The reconciliation's search for them probes the gaps between the owners it knows (PostgreSQL's
      // ORPHAN_OWNERS); a gap with several must give them all back, the registered owners' rows stay.
      const dir = h.tempDir();
      const store = await openStore(dir);
      const { id, name } = await store.createAccount('acme', 'pro');
      const month = monthOf(new Date());
      for (const live of ['k-live', 'p-live'])
        await h.raw(store, 'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5)', [
          live,
          'elsewhere',
          1,
          '',
          Date.now() + LEASE_MS,
        ]);
      const orphans = ['!first', 'k-m1', 'k-m2', 'k-m3', 'p-m', '~last', '~~last'];
      const holders = [...orphans, 'k-live', 'p-live', 'p-live'];
      await h.raw(store, 'INSERT INTO usage_counters (account_id, month, operation, used) VALUES ($1, $2, $3, $4)', [id, month, 'protect', holders.length + 2]);
      for (const [i, owner] of holders.entries())
        await h.raw(store, 'INSERT INTO reservations (owner, id, account_id, month, operation) VALUES ($1, $2, $3, $4, $5)', [
          owner,
          i + 1,
          id,
          month,
          'protect',
        ]);
      expect(await store.reconcile()).toBe(orphans.length);
      expect(await store.reconcile()).toBe(0);
      const u = await store.usage(name);
      expect([u.protect.used, u.held.protect]).toEqual([5, 3]);
      const left = (await h.raw(store, 'SELECT owner FROM reservations ORDER BY owner')) as { owner: string }[];
      expect(left.map((r) => r.owner)).toEqual(['k-live', 'p-live', 'p-live']);
    });

    it('units held by a process of this host that died are given back at once', async () => {
      const dir = h.tempDir();
      const store = await openStore(dir);
      const { id, name } = await store.createAccount('acme', 'pro');
      // A process that ran and is gone: its pid and start time as an owner row would carry them.
      const child = spawnSync(process.execPath, ['-e', "process.stdout.write(require('fs').readFileSync('/proc/self/stat','utf8'))"], { encoding: 'utf8' });
      const stat = child.stdout;
      const pid = Number(stat.split(' ')[0]);
      const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
      const host = `${(await import('node:os')).hostname()}/${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}`;
      const month = monthOf(new Date());
      await h.raw(store, 'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        'dead-owner',
        host,
        pid,
        started,
        Date.now() + LEASE_MS,
      ]);
      await h.raw(store, 'INSERT INTO usage_counters (account_id, month, operation, used) VALUES ($1, $2, $3, $4)', [id, month, 'protect', 7]);
      // Held as an optmark before the hold rows counted them (a rolling upgrade: \`holds\`), and as one now does.
      await h.raw(store, 'INSERT INTO holds (owner, account_id, month, operation, n) VALUES ($1, $2, $3, $4, $5)', ['dead-owner', id, month, 'protect', 3]);
      for (const hold of [1, 2])
        await h.raw(store, 'INSERT INTO reservations (owner, id, account_id, month, operation) VALUES ($1, $2, $3, $4, $5)', [
          'dead-owner',
          hold,
          id,
          month,
          'protect',
        ]);
      // A live process of this host (this one) keeps what it holds.
      await h.raw(store, 'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        'live-owner',
        host,
        process.pid,
        readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[19]!,
        Date.now() + LEASE_MS,
      ]);
      await h.raw(store, 'INSERT INTO holds (owner, account_id, month, operation, n) VALUES ($1, $2, $3, $4, $5)', ['live-owner', id, month, 'protect', 1]);
      expect((await store.usage(name)).held.protect).toBe(6);
      expect(await store.reconcile()).toBe(5);
      expect((await store.usage(name)).protect.used).toBe(2);
      expect((await store.usage(name)).held.protect).toBe(1);
    });
  });

  describe('idempotency keys', () => {
    const SHA_A = 'a'.repeat(64);
    const SHA_B = 'b'.repeat(64);
    async function keyedAccount(store: Store, protect = 10): Promise<{ id: number; name: string }> {
      const a = await store.createAccount(`k${Math.random().toString(36).slice(2, 10)}`, 'pro');
      await store.setLimits(a.name, { protect });
      return a;
    }
    /** Reserves with `key` and commits with `sha256`: the first attempt of a keyed request that succeeded. */
    async function charged(store: Store, id: number, key: string, sha256: string, now?: Date): Promise<void> {
      const r = await store.reserve(id, 'protect', now, { key });
      if (!r.ok) throw new Error(`reserve failed: ${JSON.stringify(r)}`);
      r.reservation.idempotency!.sha256 = sha256;
      await store.commit(r.reservation, now, () => undefined);
    }

    it('a key whose unit is committed takes no unit again, even over the limit, and names its upload', async () => {
      const store = await openStore();
      const { id, name } = await keyedAccount(store, 1);
      await charged(store, id, 'order-1', SHA_A);
      const again = await store.reserve(id, 'protect', undefined, { key: 'order-1' });
      expect(again).toMatchObject({ ok: false, prior: { status: 'committed', operation: 'protect', sha256: SHA_A }, state: { used: 1, remaining: 0 } });
      expect((await store.usage(name)).protect.used).toBe(1);
      // Another key is a new request: over the limit, refused without a prior.
      const other = await store.reserve(id, 'protect', undefined, { key: 'order-2' });
      expect(other.ok).toBe(false);
      expect(other).not.toHaveProperty('prior');
    });

    it('keys are scoped to the account', async () => {
      const store = await openStore();
      const a = await keyedAccount(store);
      const b = await keyedAccount(store);
      await charged(store, a.id, 'same', SHA_A);
      expect((await store.reserve(b.id, 'protect', undefined, { key: 'same' })).ok).toBe(true);
    });

    it('a key held by a request in progress is in_progress on every instance; a refund frees it with its unit', async () => {
      const dir = h.tempDir();
      const first = await openStore(dir);
      const second = await openStore(dir);
      const { id, name } = await keyedAccount(first);
      const held = await first.reserve(id, 'protect', undefined, { key: 'k1' });
      if (!held.ok) throw new Error('reserve failed');
      expect(await second.reserve(id, 'protect', undefined, { key: 'k1' })).toMatchObject({ ok: false, prior: { status: 'in_progress' } });
      await first.refund(held.reservation);
      expect((await second.usage(name)).protect.used).toBe(0);
      const retried = await second.reserve(id, 'protect', undefined, { key: 'k1' });
      expect(retried.ok).toBe(true);
      expect((await second.usage(name)).protect.used).toBe(1);
    });

    it('a refund after the commit (the answer never arrived) frees the key: the retry is charged once', async () => {
      const store = await openStore();
      const { id, name } = await keyedAccount(store);
      const r = await store.reserve(id, 'protect', undefined, { key: 'k2' });
      if (!r.ok) throw new Error('reserve failed');
      r.reservation.idempotency!.sha256 = SHA_A;
      await store.commit(r.reservation);
      await store.refund(r.reservation);
      expect((await store.usage(name)).protect.used).toBe(0);
      await charged(store, id, 'k2', SHA_B);
      expect(await store.reserve(id, 'protect', undefined, { key: 'k2' })).toMatchObject({ prior: { status: 'committed', sha256: SHA_B } });
      expect((await store.usage(name)).protect.used).toBe(1);
    });

    it('regression (kill -9 after the commit was sent): the commit landed, the client got nothing; its retry is free on another instance', async () => {
      const dir = h.tempDir();
      const killed = await openStore(dir);
      const survivor = await openStore(dir);
      const { id, name } = await keyedAccount(killed);
      // The pipelined commit of the server: the statement is on its way when onSent runs, which sends the
      // last byte; the process dies there. The answer never reached the client.
      const r = await killed.reserve(id, 'protect', undefined, { key: 'upload-7' });
      if (!r.ok) throw new Error('reserve failed');
      r.reservation.idempotency!.sha256 = SHA_A;
      await killed.commit(r.reservation, undefined, () => undefined);
      // Its lease runs out: a reconciliation gives back nothing (the unit was committed).
      expect(await survivor.reconcile(new Date(Date.now() + LEASE_MS + 1000))).toBe(0);
      const retry = await survivor.reserve(id, 'protect', undefined, { key: 'upload-7' });
      expect(retry).toMatchObject({ ok: false, prior: { status: 'committed', sha256: SHA_A } });
      expect((await survivor.usage(name)).protect.used).toBe(1);
    });

    it('regression (kill -9 before the commit): the held key goes back with its unit, and the retry is charged once', async () => {
      const dir = h.tempDir();
      const killed = await openStore(dir);
      const survivor = await openStore(dir);
      const { id, name } = await keyedAccount(killed);
      const r = await killed.reserve(id, 'protect', undefined, { key: 'upload-8' });
      if (!r.ok) throw new Error('reserve failed');
      // While the dead instance's lease runs: in progress (409 at the edge), no unit taken.
      expect(await survivor.reserve(id, 'protect', undefined, { key: 'upload-8' })).toMatchObject({ ok: false, prior: { status: 'in_progress' } });
      expect(await survivor.reconcile(new Date(Date.now() + LEASE_MS + 1000))).toBe(1);
      await charged(survivor, id, 'upload-8', SHA_A);
      expect((await survivor.usage(name)).protect).toMatchObject({ used: 1 });
      expect((await survivor.usage(name)).held.protect).toBe(0);
    });

    it('over the limit the key is not kept: once the limit allows, the same key is charged', async () => {
      const store = await openStore();
      const { id, name } = await keyedAccount(store, 0);
      const refused = await store.reserve(id, 'protect', undefined, { key: 'late' });
      expect(refused.ok).toBe(false);
      expect(refused).not.toHaveProperty('prior');
      await store.setLimits(name, { protect: 1 });
      expect((await store.reserve(id, 'protect', undefined, { key: 'late' })).ok).toBe(true);
    });

    it('concurrent requests with one key on several instances take exactly one unit', async () => {
      const dir = h.tempDir();
      const stores = [await openStore(dir), await openStore(dir), await openStore(dir)];
      const { id, name } = await keyedAccount(stores[0]!);
      const results = await Promise.all(Array.from({ length: 24 }, (_, i) => stores[i % 3]!.reserve(id, 'protect', undefined, { key: 'raced' })));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      for (const r of results) if (!r.ok) expect(r.prior).toEqual({ status: 'in_progress' });
      expect((await stores[0]!.usage(name)).protect.used).toBe(1);
    });

    it('a committed key expires after 24 hours: it then names a new request; the prune deletes it, not before', async () => {
      const store = await openStore();
      const { id, name } = await keyedAccount(store);
      const t0 = new Date(Date.UTC(2030, 4, 1, 0, 0, 0));
      await charged(store, id, 'daily', SHA_A, t0);
      const hour = 3600_000;
      expect(await store.pruneIdempotencyKeys(new Date(t0.getTime() + 23 * hour))).toBe(0);
      expect(await store.reserve(id, 'protect', new Date(t0.getTime() + 23 * hour), { key: 'daily' })).toMatchObject({ prior: { status: 'committed' } });
      const later = new Date(t0.getTime() + 25 * hour);
      await charged(store, id, 'daily', SHA_B, later);
      expect((await store.usage(name, '2030-05')).protect.used).toBe(2);
      expect(await store.pruneIdempotencyKeys(new Date(later.getTime() + 25 * hour))).toBe(1);
      expect(await store.pruneIdempotencyKeys(new Date(later.getTime() + 25 * hour))).toBe(0);
    });
  });

  describe('operator side', () => {
    it('raises typed errors for operator mistakes', async () => {
      const store = await openStore();
      await store.createAccount('acme', 'pro');
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
      for (const [name, fn, code] of cases) expect(await storeErrorCode(fn), name).toBe(code);
    });

    it('finds accounts by name ignoring case', async () => {
      const store = await openStore();
      await store.createAccount('Acme', 'pro');
      expect((await store.getAccount('aCME')).name).toBe('Acme');
      expect((await store.setPlan('ACME', 'free')).plan).toBe('free');
    });

    it('revokes by 12-character prefix, display prefix or whole key, and refuses an ambiguous prefix', async () => {
      const store = await openStore();
      await store.createAccount('acme', 'pro');
      const a = await store.issueKey('acme');
      const b = await store.issueKey('acme');
      expect((await store.revokeKey(a.key.slice(0, 12))).prefix).toBe(a.prefix);
      expect((await store.revokeKey(b.key)).prefix).toBe(b.prefix);
      // Two live keys sharing a 12-character prefix: forge the second row's prefix to force the collision.
      const c = await store.issueKey('acme');
      const d = await store.issueKey('acme');
      await h.raw(store, 'UPDATE api_keys SET prefix = $1 WHERE id = $2', [`${c.prefix.slice(0, 12)}zzzz`, d.id]);
      expect(await storeErrorCode(() => store.revokeKey(c.prefix.slice(0, 12)))).toBe('ambiguous_key_prefix');
      expect((await store.revokeKey(c.prefix)).prefix).toBe(c.prefix);
      // With one of the two revoked, the shorter prefix names the live one unambiguously.
      expect((await store.revokeKey(c.prefix.slice(0, 12))).prefix).toBe(`${c.prefix.slice(0, 12)}zzzz`);
    });

    it('lists accounts and keys without the keys themselves', async () => {
      const store = await openStore(undefined, { protect: 3, verify: 4 });
      await store.createAccount('b', 'free');
      await store.createAccount('a', 'pro');
      await store.setLimits('a', { verify: 40 });
      expect((await store.listAccounts()).map((a) => [a.name, a.plan, a.protectLimit, a.verifyLimit])).toEqual([
        ['a', 'pro', 3, 40],
        ['b', 'free', 3, 4],
      ]);
      const { key, prefix } = await store.issueKey('a');
      const listed = await store.listKeys('a');
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ prefix, lastUsedAt: null, revokedAt: null });
      expect(JSON.stringify(listed)).not.toContain(key.slice(prefix.length));
    });

    it('bootstraps one pro account with one working key, only on an empty store', async () => {
      const dir = h.tempDir();
      const store = await openStore(dir);
      const boot = await store.bootstrapIfEmpty();
      expect(boot?.account).toMatchObject({ name: 'default', plan: 'pro' });
      expect((await store.authenticate(`Bearer ${boot!.key}`)).ok).toBe(true);
      expect(await store.bootstrapIfEmpty()).toBeUndefined();
      expect(await (await openStore(dir)).bootstrapIfEmpty()).toBeUndefined();
      const other = await openStore();
      await other.createAccount('someone', 'free');
      expect(await other.bootstrapIfEmpty()).toBeUndefined();
    });

    it('snapshots and restores accounts, key hashes and committed counters', async () => {
      const source = await openStore();
      const { id } = await source.createAccount('acme', 'pro');
      await source.setLimits('acme', { protect: 50 });
      await source.createAccount('other', 'free');
      const { key, prefix } = await source.issueKey('acme');
      const revoked = await source.issueKey('acme');
      await source.revokeKey(revoked.prefix);
      for (let i = 0; i < 3; i++) {
        const r = await source.reserve(id, 'protect');
        if (r.ok) await source.commit(r.reservation);
      }
      expect((await source.reserve(id, 'protect')).ok).toBe(true); // held: not copied
      const month = monthOf(new Date());
      const snap = await source.snapshot([month]);
      const target = await openStore();
      expect(await target.isEmpty()).toBe(true);
      await target.restore(snap);
      expect(await target.isEmpty()).toBe(false);
      expect((await target.listAccounts()).map((a) => [a.name, a.plan, a.protectLimit])).toEqual([
        ['acme', 'pro', 50],
        ['other', 'free', 10_000],
      ]);
      expect((await target.authenticate(`Bearer ${key}`)).ok).toBe(true);
      expect((await target.authenticate(`Bearer ${revoked.key}`)).ok).toBe(false);
      expect((await target.listKeys('acme')).map((k) => k.prefix)).toEqual([prefix, revoked.prefix]);
      expect((await target.usage('acme')).protect.used).toBe(3);
    });
  });
});

describe("the reconciliation's search for unregistered owners (PostgreSQL)", () => {
  const h = new StoreHarness('postgres');
  beforeAll(() => h.setup());
  afterEach(() => h.closeAll());
  afterAll(() => h.teardown());

  /** The pages a statement read (shared buffers hit or read), from EXPLAIN (ANALYZE, BUFFERS). */
  async function pagesRead(c: pg.Client, sql: string, params: unknown[]): Promise<number> {
    const r = await c.query<{ 'QUERY PLAN': [{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`,
      params,
    );
    const plan = r.rows[0]!['QUERY PLAN'][0].Plan;
    return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
  }

  it('reads a few pages, not the dead hold rows that commits leave until VACUUM (schema 5: an index on the owner)', async () => {
    // Before: `owner NOT IN (SELECT id FROM owners)` read the whole table every second on every instance:
    // with 100,000 dead rows 1,235 pages (a million: 10,300 pages, 270-370 ms; docs/scaling.md).
    const store = await h.open();
    const { id } = await store.createAccount('acme', 'pro');
    const c = await h.client(store);
    try {
      const month = monthOf(new Date());
      await c.query(`INSERT INTO reservations (owner, id, account_id, month, operation) SELECT $1, g, $2, $3, 'protect' FROM generate_series(1, 100000) g`, [
        store.instanceId,
        id,
        month,
      ]);
      await c.query('DELETE FROM reservations WHERE id <= 99990'); // committed: dead until VACUUM
      await c.query("INSERT INTO reservations (owner, id, account_id, month, operation) VALUES ('gone', 1, $1, $2, 'protect')", [id, month]);
      await c.query("INSERT INTO usage_counters (account_id, month, operation, used) VALUES ($1, $2, 'protect', 11)", [id, month]);
      const { lo, hi, last } = ownerGaps([store.instanceId]);
      expect((await c.query(ORPHAN_OWNERS, [lo, hi, last])).rows).toEqual([{ owner: 'gone' }]);
      expect(await pagesRead(c, ORPHAN_OWNERS, [lo, hi, last])).toBeLessThan(30);
      const indexes = await c.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE tablename = 'reservations' AND schemaname = current_schema()");
      expect(indexes.rows.map((r) => r.indexdef)).toContainEqual(expect.stringMatching(/^CREATE INDEX reservations_owner ON \S+ USING btree \(owner\)$/));
    } finally {
      await c.end();
    }
    expect(await store.reconcile()).toBe(1);
  });

  it('a schema at version 4 is brought to the current one at start: the index is made, the hold rows are kept', async () => {
    const dir = h.tempDir();
    const first = await h.open(dir);
    const { id } = await first.createAccount('acme', 'pro');
    const held = await first.reserve(id, 'protect');
    if (!held.ok) throw new Error('reserve failed');
    await h.raw(first, 'DROP INDEX reservations_owner');
    await dropSignalLayers(h, first);
    await h.raw(first, 'DELETE FROM optmark_schema WHERE version >= 5');
    const second = await h.open(dir);
    expect(PG_SCHEMA_VERSION).toBe(7);
    expect((await h.raw(second, 'SELECT max(version)::int AS v FROM optmark_schema'))[0]).toEqual({ v: 7 });
    expect(await h.raw(second, "SELECT indexname FROM pg_indexes WHERE indexname = 'reservations_owner' AND schemaname = current_schema()")).toHaveLength(1);
    expect((await first.commit(held.reservation))?.used).toBe(1);
    expect(await second.reconcile()).toBe(0);
  });
});

describe('batched statements (PostgreSQL)', () => {
  const h = new StoreHarness('postgres');
  beforeAll(() => h.setup());
  afterEach(() => h.closeAll());
  afterAll(() => h.teardown());

  async function accountWith(store: Store, protect: number): Promise<{ id: number; name: string }> {
    const a = await store.createAccount(`b${Math.random().toString(36).slice(2, 10)}`, 'pro');
    await store.setLimits(a.name, { protect });
    return { id: a.id, name: a.name };
  }

  /** An account whose counter row exists: one unit reserved and committed. */
  async function accountUsedOnce(store: Store, protect: number): Promise<{ id: number; name: string }> {
    const a = await accountWith(store, protect);
    const first = await store.reserve(a.id, 'protect');
    if (!first.ok) throw new Error('reserve failed');
    await store.commit(first.reservation);
    return a;
  }

  /** Another session that holds the account's rows of `table` locked until it rolls back. */
  async function lockRows(store: Store, table: 'usage_counters' | 'reservations', id: number): Promise<pg.Client> {
    const c = await h.client(store);
    try {
      await c.query('BEGIN');
      await c.query(`SELECT 1 FROM ${table} WHERE account_id = $1 FOR UPDATE`, [id]);
      return c;
    } catch (err) {
      await c.end();
      throw err;
    }
  }

  it('a reserve batch that fails fails every call in it with store_unavailable and takes nothing', async () => {
    const store = await h.open(undefined, undefined, { storeTimeoutMs: 800 });
    const { id, name } = await accountUsedOnce(store, 5);
    // Another session holds the counter row past the statement timeout: the batch's statement is cancelled.
    const blocker = await lockRows(store, 'usage_counters', id);
    try {
      const codes = await Promise.all(Array.from({ length: 6 }, () => storeErrorCode(() => store.reserve(id, 'protect'))));
      expect(codes).toEqual(Array.from({ length: 6 }, () => 'store_unavailable'));
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
    }
    const u = await store.usage(name);
    expect([u.protect.used, u.held.protect]).toEqual([1, 0]);
    const again = await Promise.all(Array.from({ length: 6 }, () => store.reserve(id, 'protect')));
    expect(again.map((r) => r.ok)).toEqual([true, true, true, true, false, false]);
  });

  it('a commit batch that fails fails every call with store_unavailable; the units stay held and commit later', async () => {
    const store = await h.open(undefined, undefined, { storeTimeoutMs: 800 });
    const { id, name } = await accountWith(store, 5);
    const held = await Promise.all(Array.from({ length: 3 }, () => store.reserve(id, 'protect')));
    const reservations = held.map((r) => (r.ok ? r.reservation : undefined)).filter((r) => r !== undefined);
    expect(reservations).toHaveLength(3);
    const blocker = await lockRows(store, 'reservations', id);
    try {
      const codes = await Promise.all(reservations.map((r) => storeErrorCode(() => store.commit(r))));
      expect(codes).toEqual(['store_unavailable', 'store_unavailable', 'store_unavailable']);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
    }
    expect((await store.usage(name)).held.protect).toBe(3);
    const states = await Promise.all(reservations.map((r) => store.commit(r)));
    expect(states.map((s) => s?.used)).toEqual([3, 3, 3]);
    const u = await store.usage(name);
    expect([u.protect.used, u.held.protect]).toEqual([3, 0]);
  });

  it('requests with one key that find its cached entry expired share one lookup', async () => {
    const store = await h.open(undefined, undefined, { authCacheMs: 50 });
    const { name } = await accountWith(store, 5);
    const { key } = await store.issueKey(name);
    expect((await store.authenticate(`Bearer ${key}`)).ok).toBe(true);
    const probe = await h.client(store);
    const connections = async () =>
      Number(
        (await probe.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'optmark'"))
          .rows[0]!.n,
      );
    try {
      const before = await connections();
      await new Promise((r) => setTimeout(r, 60));
      // Eight lookups at once would take eight pooled connections; one takes the one the pool has.
      const results = await Promise.all(Array.from({ length: 8 }, () => store.authenticate(`Bearer ${key}`)));
      expect(results.map((r) => r.ok && r.account.name)).toEqual(Array.from({ length: 8 }, () => name));
      expect(await connections()).toBe(before);
    } finally {
      await probe.end();
    }
  });

  it('a connection cut while checked out fails its statement with store_unavailable; the process lives on', async () => {
    // node-postgres emits 'error' on a client whose connection ends without a word from the database; a
    // client checked out of the pool has no pool listener then, and an 'error' without a listener ends
    // the process (the server died so when PostgreSQL went away: test/long/pg-unavailable.test.ts).
    const relay = await Relay.to(TEST_DATABASE_URL);
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => void uncaught.push(err);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const store = await h.open(undefined, undefined, { through: relay });
      const { id, name } = await accountUsedOnce(store, 5);
      const blocker = await lockRows(store, 'usage_counters', id);
      try {
        // The reserve's statement waits on the lock, on a connection the store checked out of its pool.
        const pending = storeErrorCode(() => store.reserve(id, 'protect'));
        await waitFor('the reserve waiting on the lock', async () => {
          const r = await blocker.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'optmark' AND wait_event_type = 'Lock'");
          return r.rowCount ? true : undefined;
        });
        relay.set('pass'); // cuts every connection through the relay, mid-statement
        expect(await pending).toBe('store_unavailable');
      } finally {
        await blocker.query('ROLLBACK').catch(() => undefined);
        await blocker.end();
      }
      // The pool connects again: the next reserve is served. (The cut statement's own outcome is not
      // known to the store: PostgreSQL may still have run it once the lock was let go.)
      const again = await store.reserve(id, 'protect');
      expect(again.ok).toBe(true);
      if (again.ok) await store.commit(again.reservation);
      expect((await store.usage(name)).protect.used).toBeGreaterThanOrEqual(2);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      await relay.close();
    }
    expect(uncaught.map(String)).toEqual([]);
  });

  it.each([
    ['while a reservation of its owner is outstanding (the owner is released after it)', true],
    ['after its owner was released (the reconciliation gives back an ownerless hold)', false],
  ])('a reserve cut mid-statement that PostgreSQL still runs gives its unit back, %s; requests meanwhile are exact', async (_, outstanding) => {
    // The statement waits on a row lock when the relay cuts its connection; the lock is let go and
    // PostgreSQL runs it: a unit counted and held under this instance's owner that no request knows of.
    const relay = await Relay.to(TEST_DATABASE_URL);
    try {
      const store = await h.open(undefined, undefined, { through: relay });
      await store.startBackground(); // lease renewal and reconciliation every second, as a server runs them
      const { id, name } = await accountWith(store, 100);
      const seed = await store.reserve(id, 'protect'); // the counter row the statement will wait on
      if (!seed.ok) throw new Error('reserve failed');
      await store.commit(seed.reservation);
      const e = outstanding ? 2 : 1; // units committed besides the 20 and the late one
      const early = outstanding ? await store.reserve(id, 'protect') : undefined; // across the cut, under the first owner
      if (early && !early.ok) throw new Error('reserve failed');
      const first = store.instanceId;
      const probe = await h.client(store);
      const count = async (sql: string) => Number((await probe.query<{ n: string }>(sql, [id])).rows[0]!.n);
      const held = () => count('SELECT count(*) AS n FROM reservations WHERE account_id = $1');
      const used = () => count('SELECT coalesce(sum(used), 0) AS n FROM usage_counters WHERE account_id = $1');
      const waiting = async (state = "wait_event_type = 'Lock'") =>
        (await probe.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'optmark' AND ${state}`)).rowCount;
      try {
        await probe.query('BEGIN');
        await probe.query('SELECT used FROM usage_counters WHERE account_id = $1 FOR UPDATE', [id]);
        const pending = storeErrorCode(() => store.reserve(id, 'protect'));
        await waitFor('the reserve waiting on the lock', async () => ((await waiting()) ? true : undefined));
        relay.set('pass'); // cuts the reserve's connection while PostgreSQL still has its statement
        expect(await pending).toBe('store_unavailable');
        await probe.query('COMMIT'); // the lock goes: PostgreSQL runs the cut statement
        // The cut statement's backend runs it to its end, then finds its client gone and exits.
        await waitFor('the cut statement run', async () => ((await waiting("state = 'active'")) ? undefined : true));
        if (early) {
          expect(await used()).toBe(3); // the seed, the early reservation and the orphan (both held)
          expect(await held()).toBe(2);
        }
        // New reservations go under a fresh owner; 20 requests reserve and commit meanwhile, all answered.
        const results = await Promise.all(
          Array.from({ length: 20 }, async () => {
            const r = await store.reserve(id, 'protect');
            if (!r.ok) throw new Error('reserve refused');
            return (await store.commit(r.reservation))?.used;
          }),
        );
        expect(results.every((u) => typeof u === 'number')).toBe(true);
        const late = await store.reserve(id, 'protect'); // held under the new owner to the end
        if (!late.ok) throw new Error('reserve failed');
        if (early) {
          // The first owner lives on while the early reservation is outstanding; its commit goes under it.
          expect((await probe.query('SELECT 1 FROM owners WHERE id = $1', [first])).rowCount).toBe(1);
          expect(await store.commit(early.reservation)).toBeDefined();
        }
        // Then exactly the orphan unit goes back, nothing else.
        await waitFor('the orphan unit given back', async () => ((await held()) === 1 ? true : undefined)); // the late reservation
        expect((await probe.query('SELECT 1 FROM owners WHERE id = $1', [first])).rowCount).toBe(0);
        expect(await used()).toBe(21 + e); // the seed and the early one, 20 committed, the late one held
        expect((await store.usage(name)).protect.used).toBe(21 + e);
        await store.refund(late.reservation);
        expect(await held()).toBe(0);
        expect(await used()).toBe(20 + e);
      } finally {
        await probe.query('ROLLBACK').catch(() => undefined);
        await probe.end();
      }
    } finally {
      await relay.close();
    }
  });

  it.each([
    ['a commit', 'commit'],
    ['a keyed commit', 'keyed commit'],
    ['a refund', 'refund'],
    ['a keyed refund', 'keyed refund'],
    ['a refund after the commit', 'refund committed'],
  ] as const)('regression: %s sent again after a cut, whose first sending ran, acts once and on its own reservation only', async (_, kind) => {
    // The relay passes the statement to PostgreSQL, which runs it, and swallows the answer; then it cuts the
    // connection: the store knows the statement was sent, not whether it ran, and sends it again. With a
    // hold count per owner and counter, the second sending took the other reservation's unit.
    const relay = await Relay.to(TEST_DATABASE_URL);
    try {
      const store = await h.open(undefined, undefined, { through: relay });
      const { id, name } = await accountWith(store, 10);
      const keyed = kind.startsWith('keyed');
      const take = async (key: string) => {
        const r = await store.reserve(id, 'protect', undefined, keyed ? { key, sha256: 'c'.repeat(64) } : undefined);
        if (!r.ok) throw new Error('reserve failed');
        return r.reservation;
      };
      const first = await take('first');
      const other = await take('other');
      if (kind === 'refund committed') await store.commit(first);
      relay.deafen();
      let sent = false;
      const cut = kind.endsWith('commit')
        ? storeErrorCode(() => store.commit(first, undefined, () => void (sent = true)))
        : storeErrorCode(() => store.refund(first));
      await waitFor('the statement run and its answer swallowed', () => (relay.answered() ? true : undefined));
      relay.set('pass'); // cuts the connection: the answer is lost
      expect(await cut).toBe('store_unavailable');
      if (kind.endsWith('commit')) {
        expect(sent).toBe(true); // the answer went out with it: the store commits again in the background
        await store.startBackground(); // its first pass sends the commit again
      } else {
        await store.refund(first); // as the background work does
      }
      const committed = kind.endsWith('commit') ? 2 : 1;
      expect((await store.commit(other))?.used).toBe(committed);
      const u = await store.usage(name);
      expect([u.protect.used, u.held.protect]).toEqual([committed, 0]);
      // No row is left behind: a refund's mark goes once the refund is answered (the background work).
      await store.startBackground();
      const rows = async () => Number((await h.raw(store, 'SELECT count(*) AS n FROM reservations WHERE account_id = $1', [id]))[0]!.n);
      await waitFor('the marks deleted', async () => ((await rows()) === 0 ? true : undefined));
    } finally {
      await relay.close();
    }
  });

  it('batches from several instances racing for one fresh counter row grant exactly the limit', async () => {
    const dir = h.tempDir();
    const stores = await Promise.all([h.open(dir), h.open(dir), h.open(dir)]);
    const { id, name } = await accountWith(stores[0]!, 25);
    // No counter row yet: each instance's first batch tries to create it; the ones that lose are sent again.
    const results = await Promise.all(Array.from({ length: 90 }, (_, i) => stores[i % 3]!.reserve(id, 'protect')));
    expect(results.filter((r) => r.ok)).toHaveLength(25);
    for (const s of stores) {
      const mine = results.filter((_, i) => stores[i % 3] === s);
      // Within one instance the granted calls come first, in order.
      const ok = mine.map((r) => r.ok);
      expect(ok).toEqual([...ok].sort((x, y) => Number(y) - Number(x)));
    }
    const u = await stores[1]!.usage(name);
    expect([u.protect.used, u.held.protect]).toEqual([25, 25]);
  });
});

describe('database file (SQLite)', () => {
  const h = new StoreHarness('sqlite');
  afterEach(() => h.closeAll());
  const openStore = (dataDir?: string, limits?: { protect: number; verify: number }) => h.open(dataDir, limits);

  // biome-ignore lint/suspicious/noTemplateCurlyInString: the name shows the path literally.
  it('is ${dataDir}/optmark.db in WAL mode with the current schema version', async () => {
    const dir = h.tempDir();
    await openStore(dir);
    const db = new Database(join(dir, 'optmark.db'), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
  });

  it('regression: reservations checkpoint and rewind the WAL, which stays near 1000 pages however many there are', async () => {
    // Reservations were read with .get(), whose commit skips SQLite's WAL hook: the WAL grew by a page
    // per request, without bound, until some other write checkpointed all of it at once.
    const dir = h.tempDir();
    const store = await openStore(dir, { protect: 1_000_000, verify: 0 });
    const { id } = await store.createAccount('acme', 'pro');
    for (let i = 0; i < 4000; i++) {
      const r = await store.reserve(id, 'protect');
      if (!r.ok) throw new Error('refused');
      await store.commit(r.reservation);
    }
    const wal = readFileSync(join(dir, 'optmark.db-wal'));
    const pageSize = wal.readUInt32BE(8);
    expect(wal.length).toBeLessThanOrEqual(32 + 1100 * (pageSize + 24));
    expect(wal.readUInt32BE(12)).toBeGreaterThanOrEqual(3); // rewound at least 3 times
    expect((await store.usage('acme')).protect.used).toBe(4000);
  });

  it('stores no plain key, only its SHA-256', async () => {
    const dir = h.tempDir();
    const store = await openStore(dir);
    await store.createAccount('acme', 'pro');
    const keys: string[] = [];
    for (let i = 0; i < 5; i++) keys.push((await store.issueKey('acme')).key);
    await store.authenticate(`Bearer ${keys[0]}`);
    const read = () => Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f))));
    const bytes = read();
    for (const key of keys) {
      expect(bytes.includes(key)).toBe(false);
      expect(bytes.includes(key.slice(16))).toBe(false);
    }
    expect(bytes.includes(hashKey(keys[0]!))).toBe(true);
    await store.close();
    const checkpointed = read();
    for (const key of keys) expect(checkpointed.includes(key)).toBe(false);
  });

  it('refuses a database from a newer optmark', async () => {
    const dir = h.tempDir();
    await (await openStore(dir)).close();
    const db = new Database(join(dir, 'optmark.db'));
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(await storeErrorCode(() => openStore(dir))).toBe('schema_too_new');
  });
});

/** Undoes schema versions 7 (scans) and 6 (the dashboard batches' signal layers), for a test that sets the schema further back. */
async function dropSignalLayers(h: StoreHarness, store: Store): Promise<void> {
  for (const table of ['scan_items', 'scan_chunks', 'scans', 'scan_days']) await h.raw(store, `DROP TABLE ${table}`);
  for (const column of ['tdmrep', 'content_credentials']) await h.raw(store, `ALTER TABLE dashboard_batches DROP COLUMN ${column}`);
}
