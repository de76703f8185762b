/**
 * The Private Vault's HTTP routes on a real server (issue #39 points 1-3): off by default, turned on with
 * PUT, uploads kept once per content, listing newest first with filters and pages, metadata, content
 * with Range (206, 416) and the right headers, delete (204, then 404), another account's object 404,
 * vault_disabled and vault_quota_exceeded with nothing stored, 405 with Allow, and the answers matching
 * docs/openapi.json.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError } from './helpers/assert.js';
import { type Answer, imageForm, request, TestServer } from './helpers/server.js';

let server: TestServer;
let key: string;
let otherKey: string;

const auth = (k: string, extra: Record<string, string> = {}) => ({ Authorization: `Bearer ${k}`, ...extra });
const get = (path: string, k = key, headers: Record<string, string> = {}) => request(server, path, { headers: auth(k, headers) });
const put = (enabled: unknown, k = key) =>
  request(server, '/api/v1/vault', { method: 'PUT', headers: auth(k, { 'Content-Type': 'application/json' }), body: Buffer.from(JSON.stringify({ enabled })) });
const upload = (image: Buffer, name = 'photo.jpg', type = 'image/jpeg', k = key): Promise<Answer> => {
  const form = imageForm(image, name, type);
  return request(server, '/api/v1/vault/objects', { method: 'POST', headers: auth(k, { 'Content-Type': form.contentType }), body: form.body });
};
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const photo = (seed: number, format: 'jpeg' | 'png' = 'jpeg') =>
  sharp({ create: { width: 64 + seed, height: 48, channels: 3, background: { r: seed * 7, g: 90, b: 200 - seed } } })
    [format]()
    .toBuffer();

function filesUnder(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name));
  } catch {
    return [];
  }
}

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_VAULT_LIMIT_BYTES: '200000' } });
  ({ key } = await server.account());
  ({ key: otherKey } = await server.account());
}, 60_000);
afterAll(() => server?.dispose());

describe('the Private Vault over HTTP', () => {
  it('is off by default; uploads are refused vault_disabled and nothing is stored', async () => {
    const s = await get('/api/v1/vault');
    expect(s.status).toBe(200);
    expect(s.json).toEqual({ enabled: false, usedBytes: 0, limitBytes: 200000, objects: 0 });
    expectConforms(s, 'get', '/api/v1/vault');
    expectError(await upload(await photo(1)), 409, 'vault_disabled');
    expect(filesUnder(join(server.dataDir, 'vault'))).toEqual([]);
    expectError(await put('yes'), 400, 'invalid_request');
  });

  it('turned on, it keeps an upload once, lists, describes and serves it with ranges, and deletes it', async () => {
    const on = await put(true);
    expect(on.status).toBe(200);
    expect(on.json.enabled).toBe(true);
    const img = await photo(2);
    const a = await upload(img, 'Été à Paris.jpg');
    expect(a.status).toBe(201);
    expectConforms(a, 'post', '/api/v1/vault/objects');
    expect(a.json).toMatchObject({ name: 'Été à Paris.jpg', sha256: sha(img), bytes: img.length, mimeType: 'image/jpeg', kind: 'original', record: null });
    const again = await upload(img, 'copy.jpg');
    expect(again.status).toBe(200);
    expect(again.json.id).toBe(a.json.id);
    expect((await get('/api/v1/vault')).json).toMatchObject({ usedBytes: img.length, objects: 1 });

    const meta = await get(`/api/v1/vault/objects/${a.json.id}`);
    expect(meta.json).toEqual(a.json);
    expectConforms(meta, 'get', '/api/v1/vault/objects/{id}');

    const whole = await get(`/api/v1/vault/objects/${a.json.id}/content`);
    expect(whole.status).toBe(200);
    expect(whole.body.equals(img)).toBe(true);
    expect(whole.headers['content-type']).toBe('image/jpeg');
    expect(whole.headers['content-disposition']).toBe(`attachment; filename="_t_ _ Paris.jpg"; filename*=UTF-8''%C3%89t%C3%A9%20%C3%A0%20Paris.jpg`);
    expect(whole.headers['accept-ranges']).toBe('bytes');

    const part = await get(`/api/v1/vault/objects/${a.json.id}/content`, key, { Range: 'bytes=10-99' });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 10-99/${img.length}`);
    expect(part.body.equals(img.subarray(10, 100))).toBe(true);
    const tail = await get(`/api/v1/vault/objects/${a.json.id}/content`, key, { Range: 'bytes=-7' });
    expect(tail.body.equals(img.subarray(img.length - 7))).toBe(true);
    const open = await get(`/api/v1/vault/objects/${a.json.id}/content`, key, { Range: `bytes=${img.length - 3}-` });
    expect(open.body.equals(img.subarray(img.length - 3))).toBe(true);
    const beyond = await get(`/api/v1/vault/objects/${a.json.id}/content`, key, { Range: `bytes=${img.length}-` });
    expect(beyond.status).toBe(416);
    expect(beyond.headers['content-range']).toBe(`bytes */${img.length}`);

    // Another account: 404 for the metadata, the content and a delete, never 403.
    for (const path of [`/api/v1/vault/objects/${a.json.id}`, `/api/v1/vault/objects/${a.json.id}/content`])
      expectError(await get(path, otherKey), 404, 'not_found');
    expectError(await request(server, `/api/v1/vault/objects/${a.json.id}`, { method: 'DELETE', headers: auth(otherKey) }), 404, 'not_found');

    const del = await request(server, `/api/v1/vault/objects/${a.json.id}`, { method: 'DELETE', headers: auth(key) });
    expect(del.status).toBe(204);
    expectError(await get(`/api/v1/vault/objects/${a.json.id}`), 404, 'not_found');
    expect((await get('/api/v1/vault')).json).toMatchObject({ usedBytes: 0, objects: 0 });
    expect(filesUnder(join(server.dataDir, 'vault'))).toEqual([]);
  });

  it('lists newest first, filters by name, SHA-256 and record, and pages with a cursor', async () => {
    await put(true);
    const made: Answer[] = [];
    for (let i = 0; i < 5; i++)
      made.push(await upload(await photo(10 + i, i % 2 ? 'png' : 'jpeg'), i % 2 ? `beach-${i}.png` : `city-${i}.jpg`, i % 2 ? 'image/png' : 'image/jpeg'));
    const all = await get('/api/v1/vault/objects');
    expectConforms(all, 'get', '/api/v1/vault/objects');
    expect(all.json.objects.map((o: { id: string }) => o.id)).toEqual(made.map((m) => m.json.id).reverse());
    expect((await get('/api/v1/vault/objects?name=BEACH')).json.objects.map((o: { name: string }) => o.name)).toEqual(['beach-3.png', 'beach-1.png']);
    expect((await get(`/api/v1/vault/objects?sha256=${made[2]!.json.sha256}`)).json.objects).toHaveLength(1);
    expect((await get('/api/v1/vault/objects?record=nothing')).json.objects).toEqual([]);
    // q: part of the name, or a whole SHA-256 (the dashboard's search box).
    expect((await get('/api/v1/vault/objects?q=city')).json.objects.map((o: { name: string }) => o.name)).toEqual(['city-4.jpg', 'city-2.jpg', 'city-0.jpg']);
    expect((await get(`/api/v1/vault/objects?q=${made[1]!.json.sha256}`)).json.objects.map((o: { id: string }) => o.id)).toEqual([made[1]!.json.id]);
    const p1 = await get('/api/v1/vault/objects?limit=2');
    const p2 = await get(`/api/v1/vault/objects?limit=2&cursor=${p1.json.next}`);
    const p3 = await get(`/api/v1/vault/objects?limit=2&cursor=${p2.json.next}`);
    expect([...p1.json.objects, ...p2.json.objects, ...p3.json.objects].map((o: { id: string }) => o.id)).toEqual(
      all.json.objects.map((o: { id: string }) => o.id),
    );
    expect(p3.json.next).toBeNull();
    expectError(await get('/api/v1/vault/objects?cursor=bogus'), 400, 'invalid_query');
    expectError(await get('/api/v1/vault/objects?sha256=xyz'), 400, 'invalid_query');
    for (const m of made) await request(server, `/api/v1/vault/objects/${m.json.id}`, { method: 'DELETE', headers: auth(key) });
  });

  it('over the limit: vault_quota_exceeded and nothing stored; a non-image is unsupported_format', async () => {
    await put(true, otherKey);
    const big = await sharp({ create: { width: 400, height: 400, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
      .png()
      .toBuffer();
    expect(big.length).toBeGreaterThan(200000);
    const before = filesUnder(join(server.dataDir, 'vault')).length;
    expectError(await upload(big, 'big.png', 'image/png', otherKey), 413, 'vault_quota_exceeded');
    expect(filesUnder(join(server.dataDir, 'vault')).length).toBe(before);
    expect((await get('/api/v1/vault', otherKey)).json).toMatchObject({ usedBytes: 0, objects: 0 });
    expectError(await upload(randomBytes(500), 'x.jpg', 'image/jpeg', otherKey), 415, 'unsupported_format');
  });

  it('turning it off keeps what is stored; wrong methods are 405 with Allow; no key is 401', async () => {
    await put(true);
    const a = await upload(await photo(40));
    await put(false);
    expect((await get(`/api/v1/vault/objects/${a.json.id}/content`)).status).toBe(200);
    const wrong = await request(server, '/api/v1/vault', { method: 'POST', headers: auth(key) });
    expectError(wrong, 405, 'method_not_allowed');
    expect(wrong.headers.allow).toBe('GET, HEAD, PUT');
    expect((await request(server, '/api/v1/vault')).status).toBe(401);
  });

  it('verify?vault=match: a resized, re-encoded copy of a stored original is recognised; another picture is not', async () => {
    await put(true);
    const scene = (seed: number) =>
      sharp({ create: { width: 640, height: 480, channels: 3, noise: { type: 'gaussian', mean: 100 + seed, sigma: 60 } } })
        .blur(4)
        .jpeg()
        .toBuffer();
    const original = await scene(0);
    const stored = await upload(original, 'scene.jpg');
    expect(stored.status).toBe(201);
    const copy = await sharp(original).resize(320).jpeg({ quality: 60 }).toBuffer();
    const verify = (img: Buffer) => {
      const form = imageForm(img, 'q.jpg');
      return request(server, '/api/v1/verify?vault=match', { method: 'POST', headers: auth(key, { 'Content-Type': form.contentType }), body: form.body });
    };
    const hit = await verify(copy);
    expect(hit.status).toBe(200);
    expect(hit.json.vault).toHaveLength(1);
    expect(hit.json.vault[0]).toMatchObject({ id: stored.json.id, name: 'scene.jpg', record: null });
    expect(hit.json.vault[0].distance).toBeLessThanOrEqual(48);
    const miss = await verify(await scene(7));
    expect(miss.json.vault).toEqual([]);
    // Another account's originals are never reported.
    const form = imageForm(copy, 'q.jpg');
    const other = await request(server, '/api/v1/verify?vault=match', {
      method: 'POST',
      headers: auth(otherKey, { 'Content-Type': form.contentType }),
      body: form.body,
    });
    expect(other.json.vault).toEqual([]);
    // Without the query there is no vault field.
    const plainForm = imageForm(copy, 'q.jpg');
    const plain = await request(server, '/api/v1/verify', {
      method: 'POST',
      headers: auth(key, { 'Content-Type': plainForm.contentType }),
      body: plainForm.body,
    });
    expect(plain.json.vault).toBeUndefined();
    await request(server, `/api/v1/vault/objects/${stored.json.id}`, { method: 'DELETE', headers: auth(key) });
  });
});
