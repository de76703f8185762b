/**
 * Bad text on its way to a store (issue #37, point 4): a NUL, bytes that are not UTF-8, a lone
 * surrogate, a text longer than its field. PostgreSQL answered a NUL with SQLSTATE 22021 (a 500) where
 * SQLite kept it; now every text parameter is refused the same way on both engines, before any
 * statement runs: InvalidTextError in the store, 400 `invalid_text` at the HTTP edge. One table for the
 * store's text parameters, one for the API's and the dashboard's, each run on both engines.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidTextError } from '../src/errors.js';
import { StoreError, TEXT_LIMITS, type MarkRecord, type Store } from '../src/store/index.js';
import { expectError } from './helpers/assert.js';
import { smallImage } from './helpers/images.js';
import { TestServer, api, rawRequest, request } from './helpers/server.js';
import { ENGINES, createTestDatabase, suiteStoreHarness } from './helpers/stores.js';

const AT = '2026-01-15T10:00:00.000Z';
const SHA = 'ab'.repeat(32);

/** The bad texts every parameter is tried with (the over-long one per field). */
function badTexts(max: number): Array<[string, string]> {
  return [
    ['a NUL', 'a\u0000b'],
    ['a NUL at the end', 'ab\u0000'],
    ['a lone high surrogate', 'a\uD800b'],
    ['a lone low surrogate', '\uDC00'],
    ['one character too many', 'x'.repeat(max + 1)],
  ];
}

function record(batchId: string, over: Partial<MarkRecord> = {}): MarkRecord {
  return {
    id: randomUUID(),
    batchId,
    sha256: SHA,
    originalName: 'Été 🌍.jpg',
    producedName: 'Été 🌍.marked.jpg',
    mimeType: 'image/jpeg',
    bytes: 10,
    layers: ['iptc'],
    keyPrefix: 'om_live_abcd',
    provenanceKeyId: null,
    markedAt: AT,
    ...over,
  };
}

describe.each(ENGINES)("the store's text parameters on %s", (engine) => {
  const h = suiteStoreHarness(engine);

  it('refuses each bad text with invalid_text before any statement, and keeps the good ones exactly', async () => {
    const store: Store = await h.open();
    const { id } = await store.createAccount('acme', 'pro');
    const batch = await store.dashboard.openBatch(id, 'om_live_abcd', { size: 5, provenance: false, fingerprint: false });
    const d = store.dashboard;
    const rows: Array<[string, number, (v: string) => Promise<unknown>]> = [
      ['records q', TEXT_LIMITS.search, (v) => d.records(id, { q: v })],
      ['records before', TEXT_LIMITS.time, (v) => d.records(id, { before: v })],
      ['records cursor time', TEXT_LIMITS.time, (v) => d.records(id, { after: { markedAt: v, id: 'x' } })],
      ['records cursor id', TEXT_LIMITS.id, (v) => d.records(id, { after: { markedAt: AT, id: v } })],
      ['batch id', TEXT_LIMITS.id, (v) => d.batch(id, v)],
      ['takeSlot batch id', TEXT_LIMITS.id, (v) => d.takeSlot(id, v)],
      ['giveSlot batch id', TEXT_LIMITS.id, (v) => d.giveSlot(v)],
      ['batchRecords batch id', TEXT_LIMITS.id, (v) => d.batchRecords(id, v)],
      ['removeRecord id', TEXT_LIMITS.id, (v) => d.removeRecord(v)],
      ['recordBySha256', TEXT_LIMITS.id, (v) => d.recordBySha256(id, v)],
      ['openBatch key prefix', TEXT_LIMITS.id, (v) => d.openBatch(id, v, { size: 1, provenance: false, fingerprint: false })],
      ['addRecord originalName', TEXT_LIMITS.name, (v) => d.addRecord(id, record(batch.id, { originalName: v }))],
      ['addRecord producedName', TEXT_LIMITS.name, (v) => d.addRecord(id, record(batch.id, { producedName: v }))],
      ['addRecord markedAt', TEXT_LIMITS.time, (v) => d.addRecord(id, record(batch.id, { markedAt: v }))],
      ['addRecord provenanceKeyId', TEXT_LIMITS.name, (v) => d.addRecord(id, record(batch.id, { provenanceKeyId: v }))],
      ['reserve Idempotency-Key', TEXT_LIMITS.name, (v) => store.reserve(id, 'protect', new Date(), { key: v })],
      ['getAccount name', TEXT_LIMITS.name, (v) => store.getAccount(v)],
      ['usage account', TEXT_LIMITS.name, (v) => store.usage(v)],
      ['issueKey account', TEXT_LIMITS.name, (v) => store.issueKey(v)],
      ['listKeys account', TEXT_LIMITS.name, (v) => store.listKeys(v)],
      ['setPlan account', TEXT_LIMITS.name, (v) => store.setPlan(v, 'pro')],
      ['revokeKey prefix', TEXT_LIMITS.name, (v) => store.revokeKey(v)],
    ];
    const operator = new Set(['getAccount name', 'usage account', 'issueKey account', 'listKeys account', 'setPlan account', 'revokeKey prefix']);
    let cases = 0;
    for (const [what, max, call] of rows) {
      for (const [bad, value] of badTexts(max)) {
        const err = await call(value).then(
          () => undefined,
          (e: unknown) => e,
        );
        // The request path's refusal is an InvalidTextError (400); the operator side's a StoreError (a command's one line).
        expect(err, `${what} with ${bad}`).toBeInstanceOf(operator.has(what) ? StoreError : InvalidTextError);
        expect(err, `${what} with ${bad}`).toMatchObject({ code: 'invalid_text' });
        cases++;
      }
    }
    expect(cases).toBe(rows.length * 5);
    // Nothing was written by a refused call: no record, no unit, no key.
    expect(await d.batchRecords(id, batch.id)).toEqual([]);
    expect((await store.usage('acme')).protect.used).toBe(0);
    expect(await store.listKeys('acme')).toEqual([]);
    // Text both engines keep exactly: every letter, an emoji (a surrogate pair), a text of exactly the limit.
    const good = record(batch.id, { originalName: 'x'.repeat(TEXT_LIMITS.name - 2) + '🌍' });
    await d.addRecord(id, good);
    expect((await d.batchRecords(id, batch.id)).map((r) => r.originalName)).toEqual([good.originalName]);
    expect((await d.records(id, { q: '🌍' })).map((r) => r.id)).toEqual([good.id]);
    expect(await d.records(id, { q: 'y'.repeat(TEXT_LIMITS.search) })).toEqual([]);
  });
});

describe.each(ENGINES)("the API's and the dashboard's text parameters on %s", (engine) => {
  let server: TestServer;
  let db: { url: string; drop: () => Promise<void> } | undefined;
  let key: string;
  let name: string;
  let image: Buffer;
  beforeAll(async () => {
    const env: Record<string, string> = { OPTMARK_POOL_SIZE: '1' };
    if (engine === 'postgres') {
      db = await createTestDatabase();
      env.OPTMARK_DATABASE_URL = db.url;
    }
    server = await TestServer.start({ env });
    ({ key, name } = await server.account());
    image = await smallImage('jpeg');
  });
  afterAll(async () => {
    await server?.dispose();
    await db?.drop();
  });

  const get = (path: string) => request(server, path, { headers: { Authorization: `Bearer ${key}` } });
  const cursor = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

  it('every text parameter of the dashboard: a bad text is 400 invalid_text, never a 500, and a good one is answered', async () => {
    const long = 'a'.repeat(TEXT_LIMITS.search + 1);
    const bad: string[] = [
      '/api/v1/dashboard/records?q=%00',
      '/api/v1/dashboard/records?q=a%00b',
      '/api/v1/dashboard/records?q=%FF',
      '/api/v1/dashboard/records?q=%C3',
      '/api/v1/dashboard/records?q=%ED%A0%80', // a surrogate, UTF-8 encoded: not UTF-8
      `/api/v1/dashboard/records?q=${long}`,
      '/api/v1/dashboard/records?before=2026-01-01T00:00:00.000Z%00',
      '/api/v1/dashboard/records?before=2026-01-01T00:00:00.000Z%FF',
      `/api/v1/dashboard/records?cursor=${cursor(`${AT}\u0000|abc`)}`,
      '/api/v1/dashboard/records?limit=5&q=%00',
      '/api/v1/dashboard/records/export?q=%00',
      '/api/v1/dashboard/records/export?format=json&q=%ED%B0%80',
      `/api/v1/dashboard/records/export?q=${long}`,
      '/api/v1/dashboard/account?x=%FF',
    ];
    for (const path of bad) expectError(await get(path), 400, 'invalid_text');
    for (const path of [
      '/api/v1/dashboard/records?q=%C3%89t%C3%A9',
      '/api/v1/dashboard/records?q=%F0%9F%8C%8D',
      `/api/v1/dashboard/records?q=${'a'.repeat(TEXT_LIMITS.search)}`,
      '/api/v1/dashboard/records/export?q=%C3%A9',
    ]) {
      expect((await get(path)).status, path).toBe(200);
    }
    // The server is still whole: the next request is answered.
    expect((await get('/api/v1/dashboard/records')).status).toBe(200);
  });

  it('every text parameter of the API that reaches the store (Authorization, Idempotency-Key): a 4xx with its code, no unit taken', async () => {
    const send = (headers: Record<string, string>) =>
      rawRequest(server.port, { method: 'GET', path: '/api/v1/dashboard/account', headers: { Authorization: `Bearer ${key}`, ...headers } });
    // A key with bytes past ASCII is no key: 401, never a store error.
    expectError(await send({ Authorization: 'Bearer om_live_\u00e9\u00e9' }), 401, 'invalid_api_key');
    for (const idem of ['x'.repeat(300), 'a"b', 'a\\b']) {
      const a = await api(server, 'protect', key, image, { 'Idempotency-Key': idem });
      expectError(a, 400, 'invalid_idempotency_key');
    }
    const { protect } = await server.usage(name);
    expect(protect.used).toBe(0);
  });
});
