// Idempotency-Key on the counted endpoints, through the real server, on both store engines: a retry of a
// committed request is answered again with the same bytes and no unit, a retry while the first attempt
// holds its unit is 409, the same key with another upload is 422, malformed keys are 400, and a retry
// after an instance died with the unit committed (the kill -9 window) costs nothing. Expiry and the
// store's side of each case are in test/store.test.ts.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/store/index.js';
import { expectConforms, expectError, remaining } from './helpers/assert.js';
import { smallImage } from './helpers/images.js';
import { ENGINES, createTestDatabase } from './helpers/stores.js';
import { TestServer, api, heldUpload, imageForm, rawRequest, waitFor, type Answer } from './helpers/server.js';

describe.each(ENGINES)('Idempotency-Key on %s', (engine) => {
  let server: TestServer;
  let db: { url: string; drop: () => Promise<void> } | undefined;
  let image: Buffer;
  let other: Buffer;
  let n = 0;
  const newKey = () => `key-${engine}-${++n}-${Math.random().toString(36).slice(2)}`;

  beforeAll(async () => {
    // No upload-rate floor: a held upload waits for several CLI calls, which take seconds on a loaded machine;
    // past 5 s the floor answered it 408 and gave its unit and key back, and the retry was processed (200).
    const env: Record<string, string> = { OPTMARK_POOL_SIZE: '2', OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND: '0' };
    if (engine === 'postgres') {
      db = await createTestDatabase();
      env.OPTMARK_DATABASE_URL = db.url;
    }
    server = await TestServer.start({ env });
    image = await smallImage('jpeg');
    other = await smallImage('jpeg', 80, 48);
  });
  afterAll(async () => {
    await server?.dispose();
    await db?.drop();
  });

  /**
   * A request with a key sent again after an answer: on PostgreSQL the 200's last byte goes once its commit
   * is written, not acknowledged, so a request right behind it can find the key still held (409, Retry-After).
   * As a client does, it waits and sends again.
   */
  async function again(endpoint: 'protect' | 'verify', key: string, image: Buffer, headers: Record<string, string>): Promise<Answer> {
    for (let i = 0; ; i++) {
      const a = await api(server, endpoint, key, image, headers);
      if (a.status !== 409 || i === 10) return a;
      await new Promise((r) => setTimeout(r, Number(a.headers['retry-after']) * 1000));
    }
  }

  /** The server's store, opened beside it as another instance would. */
  async function sideStore(): Promise<Store> {
    return openStore({ dataDir: server.dataDir, defaultProtectLimit: 100, defaultVerifyLimit: 100, databaseUrl: db?.url });
  }

  it('a retry of a committed request gets the same bytes, marked replayed, and costs no unit, also over the limit', async () => {
    const { name, key } = await server.account({ protect: 2 });
    const k = newKey();
    const first = await api(server, 'protect', key, image, { 'Idempotency-Key': k });
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(remaining(first)).toBe(1);
    // A new multipart boundary: the key names the image, not the body's framing.
    const replay = await again('protect', key, image, { 'Idempotency-Key': `"${k}"` });
    expect(replay.status).toBe(200);
    expectConforms(replay, 'post', '/api/v1/protect');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
    // RateLimit describes the counter as it is: the replay took nothing.
    expect(remaining(replay)).toBe(1);
    expect((await server.usage(name)).protect.used).toBe(1);

    // The raw variant: the same image bytes again.
    const rawKey = newKey();
    const raw = await api(server, 'protect', key, image, { 'Idempotency-Key': rawKey, Accept: 'image/jpeg' });
    expect(raw.status).toBe(200);
    expect(raw.headers['content-type']).toBe('image/jpeg');
    expect((await server.usage(name)).protect.used).toBe(2);
    // Over the limit now: a new key is refused, a retry of a committed one is still answered.
    expectError(await api(server, 'protect', key, image, { 'Idempotency-Key': newKey() }), 429, 'quota_exceeded');
    const rawAgain = await again('protect', key, image, { 'Idempotency-Key': rawKey, Accept: 'image/jpeg' });
    expect(rawAgain.status).toBe(200);
    expect(rawAgain.headers['idempotent-replayed']).toBe('true');
    expect(rawAgain.body.equals(raw.body)).toBe(true);
    expect(remaining(rawAgain)).toBe(0);
    expect((await server.usage(name)).protect.used).toBe(2);
  });

  it('verify takes a key too; without one every request is counted as before', async () => {
    const { name, key } = await server.account({ verify: 10 });
    const k = newKey();
    const a = await api(server, 'verify', key, image, { 'Idempotency-Key': k });
    const b = await again('verify', key, image, { 'Idempotency-Key': k });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.json).toEqual(a.json);
    expect(b.headers['idempotent-replayed']).toBe('true');
    await api(server, 'verify', key, image);
    await api(server, 'verify', key, image);
    expect((await server.usage(name)).verify.used).toBe(3);
  });

  it('a retry while the first attempt still holds its unit is 409 with Retry-After; once it is answered, the retry is replayed', async () => {
    const { name, key } = await server.account({ protect: 5 });
    const k = newKey();
    const form = imageForm(image);
    const slow = heldUpload(
      server.port,
      {
        path: '/api/v1/protect',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType, 'Idempotency-Key': k },
        body: form.body,
        chunks: 64,
      },
      form.body.length >> 1,
    );
    await slow.held;
    // Written by the client is not yet reserved by the server: wait until the first attempt holds its unit.
    await waitFor('the first attempt to hold its unit', async () => ((await server.usage(name)).held.protect === 1 ? true : undefined));
    const busy = await api(server, 'protect', key, image, { 'Idempotency-Key': k });
    expectError(busy, 409, 'idempotency_key_in_use');
    expectConforms(busy, 'post', '/api/v1/protect');
    expect(busy.headers['retry-after']).toBe('1');
    expect((await server.usage(name)).protect).toMatchObject({ used: 1 });
    slow.release();
    const first = await slow.answer;
    expect(first.status).toBe(200);
    const retry = await again('protect', key, image, { 'Idempotency-Key': k });
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.equals(first.body)).toBe(true);
    expect((await server.usage(name)).protect.used).toBe(1);
  });

  it('the same key with another upload or another operation is 422; the key keeps naming its first request', async () => {
    const { name, key } = await server.account({ protect: 5, verify: 5 });
    const k = newKey();
    expect((await api(server, 'protect', key, image, { 'Idempotency-Key': k })).status).toBe(200);
    const changed = await again('protect', key, other, { 'Idempotency-Key': k });
    expectError(changed, 422, 'idempotency_key_reused');
    expectConforms(changed, 'post', '/api/v1/protect');
    expect(remaining(changed)).toBe(4);
    expectError(await again('verify', key, image, { 'Idempotency-Key': k }), 422, 'idempotency_key_reused');
    expect((await server.usage(name)).protect.used).toBe(1);
    expect((await server.usage(name)).verify.used).toBe(0);
    expect((await again('protect', key, image, { 'Idempotency-Key': k })).headers['idempotent-replayed']).toBe('true');
  });

  it('a request that fails gives its key back with its unit: the retry is processed and counted once', async () => {
    const { name, key } = await server.account({ protect: 5 });
    const k = newKey();
    expectError(await api(server, 'protect', key, Buffer.from('not an image'), { 'Idempotency-Key': k }), 415, 'unsupported_format');
    expect((await server.usage(name)).protect.used).toBe(0);
    const retry = await api(server, 'protect', key, image, { 'Idempotency-Key': k });
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect((await server.usage(name)).protect.used).toBe(1);
  });

  it('a malformed key is 400 invalid_idempotency_key and costs nothing', async () => {
    const { name, key } = await server.account({ protect: 5 });
    const form = imageForm(image);
    for (const value of [
      'k'.repeat(256),
      'ab"cd',
      'ab\\cd',
      // (uWS itself refuses a request with control characters in a header, and drops bytes above 0x7e.)
      'ab\x7fcd',
      '""',
    ]) {
      const a = await rawRequest(server.port, {
        path: '/api/v1/protect',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType, 'Idempotency-Key': value },
        body: form.body,
      });
      expectError(a, 400, 'invalid_idempotency_key');
      expectConforms(a, 'post', '/api/v1/protect');
    }
    expect((await server.usage(name)).protect.used).toBe(0);
  });

  it('keys are printable ASCII up to 255 characters, spaces inside allowed', async () => {
    const { key } = await server.account({ protect: 5 });
    for (const k of ['k'.repeat(255), 'order 17 / attempt-group', '8e03978e-40d5-43e8-bc93-6894a57f9324']) {
      expect((await api(server, 'protect', key, image, { 'Idempotency-Key': k })).status).toBe(200);
    }
  });

  it('regression (kill -9 between the commit and the last byte): the unit was committed, the client got nothing; its retry is answered free', async () => {
    const { name, key } = await server.account({ protect: 1 });
    const account = await (async () => {
      const s = await sideStore();
      try {
        return await s.getAccount(name);
      } finally {
        await s.close();
      }
    })();
    // What an instance leaves when it dies right after writing its commit: the unit and the key with the
    // upload's SHA-256, committed together; the client saw a cut answer.
    const k = newKey();
    const dead = await sideStore();
    const r = await dead.reserve(account.id, 'protect', undefined, { key: k });
    if (!r.ok) throw new Error('reserve failed');
    r.reservation.idempotency!.sha256 = createHash('sha256').update(image).digest('hex');
    await dead.commit(r.reservation, undefined, () => undefined);
    await dead.close();
    expect((await server.usage(name)).protect.used).toBe(1);
    // The client retries with its key: the whole answer, no second unit (the limit is 1).
    const retry = await api(server, 'protect', key, image, { 'Idempotency-Key': k });
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.json).toMatchObject({ mimeType: 'image/jpeg' });
    expect((await server.usage(name)).protect).toMatchObject({ used: 1 });
    // Without a key the same retry would have been a new request: refused, the limit reached.
    expectError(await api(server, 'protect', key, image), 429, 'quota_exceeded');
  });
});
