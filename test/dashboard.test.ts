// The dashboard over real HTTP (no browser: that is test/long/dashboard-browser.test.ts): the page's
// headers and encodings, its API's refusals, the batch limit enforced by the server, the layer path with
// verify before and after, quota and slot accounting, records with search and export, the receipt, and
// verify's additive `record` field. Every JSON answer is checked against docs/openapi.json.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError, sha256 } from './helpers/assert.js';
import { GIF, smallImage } from './helpers/images.js';
import { pdfText } from './helpers/pdf.js';
import { ROOT, TestServer, api, imageForm, multipart, rawRequest, request, type Answer } from './helpers/server.js';

let server: TestServer;
let key: string;
let account: string;
let photo: Buffer;

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2' } });
  ({ key, name: account } = await server.account());
  // Large enough for the fingerprint's work resolution (short side 256).
  photo = await sharp(await smallImage('jpeg', 480, 320))
    .jpeg({ quality: 90 })
    .toBuffer();
});
afterAll(async () => {
  await server?.dispose();
});

const auth = (k: string = key): Record<string, string> => ({ Authorization: `Bearer ${k}` });
/** GET with the test's key, another key, or none (null). */
const get = (path: string, k: string | null = key, headers: Record<string, string> = {}): Promise<Answer> =>
  request(server, path, { headers: { ...(k ? auth(k) : {}), ...headers } });
const openBatch = (body: unknown, k: string = key, on: TestServer = server): Promise<Answer> =>
  request(on, '/api/v1/dashboard/batches', {
    method: 'POST',
    headers: { ...auth(k), 'Content-Type': 'application/json' },
    body: Buffer.from(JSON.stringify(body)),
  });
const markImage = (batch: string, image: Buffer, filename = 'photo.jpg', type = 'image/jpeg', k: string = key, on: TestServer = server): Promise<Answer> => {
  const form = imageForm(image, filename, type);
  return request(on, `/api/v1/dashboard/batches/${batch}/images`, {
    method: 'POST',
    headers: { ...auth(k), 'Content-Type': form.contentType },
    body: form.body,
  });
};

describe('the page', () => {
  it('GET / is the built HTML with a strict CSP, no-cache and an ETag; the same ETag gets 304', async () => {
    const a = await get('/', null);
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = a.headers['content-security-policy'] ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(a.headers['x-content-type-options']).toBe('nosniff');
    expect(a.headers['cache-control']).toBe('no-cache');
    const html = a.body.toString('utf8');
    // No inline script or style: every <script> has a src, there is no <style> and no style attribute.
    expect(html).toMatch(/<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js"><\/script>/);
    expect(html.match(/<script\b[^>]*>/g)!.every((tag) => /\ssrc=/.test(tag))).toBe(true);
    expect(html).not.toMatch(/<style|\sstyle=/i);
    const again = await get('/', null, { 'If-None-Match': a.headers.etag! });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
  });

  it('hashed assets are cached for a year and sent as brotli, gzip or plain by Accept-Encoding', async () => {
    const html = (await get('/', null)).body.toString('utf8');
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const path of assets) {
      const plain = readFileSync(join(ROOT, 'dist', 'web', path));
      // fetch would decode; ask with raw headers and compare with the build's own twins.
      const res = await fetch(server.url(path), { headers: { 'Accept-Encoding': 'br' } });
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('content-encoding')).toBe('br');
      expect(res.headers.get('vary')).toBe('Accept-Encoding');
      expect(Buffer.from(await res.arrayBuffer()).equals(plain)).toBe(true); // fetch undoes the br
      const gz = await fetch(server.url(path), { headers: { 'Accept-Encoding': 'gzip, br;q=0' } });
      expect(gz.headers.get('content-encoding')).toBe('gzip');
      expect(Buffer.from(await gz.arrayBuffer()).equals(plain)).toBe(true);
      const none = await fetch(server.url(path), { headers: { 'Accept-Encoding': 'identity' } });
      expect(none.headers.get('content-encoding')).toBeNull();
      expect(Buffer.from(await none.arrayBuffer()).equals(plain)).toBe(true);
    }
    expectError(await get('/assets/nope-123.js', null), 404, 'not_found');
  });

  it('the script and style weigh at most 100 KB gzipped', () => {
    const dir = join(ROOT, 'dist', 'web', 'assets');
    const gz = readdirSync(dir).filter((f) => /\.(js|css)\.gz$/.test(f));
    expect(gz.length).toBeGreaterThanOrEqual(2);
    const total = gz.reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(100 * 1000);
  });
});

describe('signing in', () => {
  it('answers the account, its usage against the limits, the reset date and the page limits', async () => {
    const a = await get('/api/v1/dashboard/account');
    expect(a.status).toBe(200);
    expectConforms(a, 'get', '/api/v1/dashboard/account');
    expect(a.json.account).toEqual({ name: account, plan: 'pro' });
    expect(a.json.key.prefix).toBe(key.slice(0, 16));
    expect(a.json.limits.batchSize).toBe(25);
    const now = new Date();
    expect(a.json.usage.resetsAt).toBe(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString());
    expect(a.headers['cache-control']).toBe('no-store');
  });

  it('refuses a missing, unknown, revoked or free-plan key with distinct messages', async () => {
    const missing = await get('/api/v1/dashboard/account', null);
    expectError(missing, 401, 'missing_api_key');
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);
    const unknown = await get('/api/v1/dashboard/account', `om_live_${'x'.repeat(43)}`);
    expectError(unknown, 401, 'invalid_api_key');
    const other = await server.account();
    await server.cliOk('key', 'revoke', other.key.slice(0, 16));
    const revoked = await get('/api/v1/dashboard/account', other.key);
    expectError(revoked, 401, 'invalid_api_key');
    expect(revoked.json.error).toMatch(/revoked/);
    expect(revoked.json.error).not.toBe(unknown.json.error);
    const free = await server.account({ plan: 'free' });
    expectError(await get('/api/v1/dashboard/account', free.key), 403, 'plan_required');
    // Every dashboard route refuses the same way, before any work.
    expectError(await openBatch({ size: 1 }, free.key), 403, 'plan_required');
    expectError(await markImage('00000000-0000-4000-8000-000000000000', photo, 'a.jpg', 'image/jpeg', free.key), 403, 'plan_required');
  });
});

describe('batches', () => {
  it('refuse more than 25 images, and malformed requests', async () => {
    const big = await openBatch({ size: 26, provenance: true, fingerprint: true });
    expectError(big, 400, 'batch_too_large');
    expect(big.json.error).toContain('25');
    expectConforms(big, 'post', '/api/v1/dashboard/batches');
    for (const body of [{ size: 0 }, { size: 2.5 }, { size: '3' }, { size: 3, provenance: 'yes' }, { size: 3, extra: 1 }, [], null]) {
      expectError(await openBatch(body), 400, 'invalid_request');
    }
    const notJson = await request(server, '/api/v1/dashboard/batches', { method: 'POST', headers: auth(), body: Buffer.from('{size:') });
    expectError(notJson, 400, 'invalid_request');
    const huge = await request(server, '/api/v1/dashboard/batches', { method: 'POST', headers: auth(), body: Buffer.alloc(10_000, 32) });
    expectError(huge, 413, 'payload_too_large');
    expectError(await request(server, '/api/v1/dashboard/batches', { method: 'GET', headers: auth() }), 405, 'method_not_allowed');
  });

  it('mark with both layers through the layer path, hold at most their size, and record every image', async () => {
    const before = await server.usage(account);
    const opened = await openBatch({ size: 2, provenance: true, fingerprint: true });
    expect(opened.status).toBe(201);
    expectConforms(opened, 'post', '/api/v1/dashboard/batches');
    const id: string = opened.json.id;

    const a = await markImage(id, photo, 'Holiday photo.jpg');
    expect(a.status, a.body.toString().slice(0, 300)).toBe(200);
    expectConforms(a, 'post', '/api/v1/dashboard/batches/{id}/images');
    const produced = Buffer.from(a.json.imageBase64, 'base64');
    expect(sha256(produced)).toBe(a.json.sha256);
    expect(a.json).toMatchObject({ mimeType: 'image/jpeg', filename: 'Holiday photo.jpg', originalName: 'Holiday photo.jpg', bytes: produced.length });
    expect(a.json.layers.sort()).toEqual(['fingerprint', 'provenance']);
    expect(a.json.before).toMatchObject({ optedOut: false, provenance: { present: false }, fingerprint: { present: false }, sha256: sha256(photo) });
    expect(a.json.after).toMatchObject({
      optedOut: true,
      signals: ['iptc.dataMining'],
      provenance: { present: true, valid: true, verifiable: true },
      fingerprint: { present: true },
      sha256: a.json.sha256,
    });
    expect(a.json.record.provenanceKeyId).toMatch(/^[0-9a-f]+$/);

    // The public verify agrees, and names the record of these bytes.
    const v = await api(server, 'verify', key, imageForm(produced, 'x.jpg'));
    expect(v.status).toBe(200);
    expectConforms(v, 'post', '/api/v1/verify');
    expect(v.json).toMatchObject({ optedOut: true, provenance: { valid: true }, fingerprint: { present: true } });
    expect(v.json.record).toMatchObject({
      id: a.json.record.id,
      batchId: id,
      originalName: 'Holiday photo.jpg',
      layers: ['fingerprint', 'provenance'],
      keyPrefix: key.slice(0, 16),
    });
    const plain = await api(server, 'verify', key, imageForm(photo, 'x.jpg'));
    expect(plain.json.record).toBeNull();
    // Another account's verify of the same bytes sees no record.
    const stranger = await server.account();
    expect((await api(server, 'verify', stranger.key, imageForm(produced, 'x.jpg'))).json.record).toBeNull();

    const png = await sharp(photo).png().toBuffer();
    const b = await markImage(id, png, 'second.png', 'image/png');
    expect(b.status).toBe(200);
    expect(b.json.mimeType).toBe('image/png');
    const third = await markImage(id, photo, 'third.jpg');
    expectError(third, 409, 'batch_full');
    expectConforms(third, 'post', '/api/v1/dashboard/batches/{id}/images');

    // Two protections counted (the refused third none), and two records of this batch.
    const after = await server.usage(account);
    expect(after.protect.used - before.protect.used).toBe(2);
    const batch = await get(`/api/v1/dashboard/batches/${id}`);
    expectConforms(batch, 'get', '/api/v1/dashboard/batches/{id}');
    expect(batch.json.used).toBe(2);
    expect(batch.json.records.map((r: { sha256: string }) => r.sha256)).toEqual([a.json.sha256, b.json.sha256]);
    // Another account cannot see it, or add to it.
    expectError(await get(`/api/v1/dashboard/batches/${id}`, stranger.key), 404, 'not_found');
  });

  it('regression: records and shows a file name as the browser had it, not as its form encoding escapes it (%22, %0D, %0A)', async () => {
    // Before: the record, the page and the receipt said my%22best%22.jpg for a file named my"best".jpg.
    const id: string = (await openBatch({ size: 1, provenance: false, fingerprint: false })).json.id;
    const a = await markImage(id, photo, 'my%22best%22 shot%0A.jpg');
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json).toMatchObject({ originalName: 'my"best" shot.jpg', filename: 'mybest shot.jpg' });
    const found = await get(`/api/v1/dashboard/records?q=${encodeURIComponent('"best"')}`);
    expect(found.json.records.map((r: { originalName: string }) => r.originalName)).toEqual(['my"best" shot.jpg']);
  });

  it('a refused image gives back its slot and its protection; errors are the API codes', async () => {
    const before = await server.usage(account);
    const id: string = (await openBatch({ size: 1 })).json.id;
    const gif = await markImage(id, GIF, 'anim.gif', 'image/gif');
    expectError(gif, 415, 'unsupported_format');
    const text = await markImage(id, Buffer.from('not a picture\n'.repeat(20)), 'notes.jpg');
    expectError(text, 415, 'unsupported_format');
    const noImage = multipart([{ name: 'other', data: 'x' }]);
    const bad = await request(server, `/api/v1/dashboard/batches/${id}/images`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': noImage.contentType },
      body: noImage.body,
    });
    expect(bad.status).toBe(400);
    // Refused from Content-Length alone, before a byte of body is read.
    const tooBig = await rawRequest(server.port, {
      path: `/api/v1/dashboard/batches/${id}/images`,
      headers: { ...auth(), 'Content-Type': 'multipart/form-data; boundary=x' },
      contentLength: 30 * 1024 * 1024,
    });
    expectError(tooBig, 413, 'payload_too_large');
    expect((await server.usage(account)).protect.used).toBe(before.protect.used);
    // The slot is still free: the one image the batch holds goes through.
    const ok = await markImage(id, photo, 'fine.jpg');
    expect(ok.status).toBe(200);
    expect(ok.json.layers).toEqual([]);
    expect(ok.json.after.provenance.present).toBe(false);
    expectError(await markImage('00000000-0000-4000-8000-000000000000', photo), 404, 'not_found');
    expectError(await markImage('not-a-uuid', photo), 404, 'not_found');
  });

  it('never answers a marked file over the upload limit: 422 output_too_large, the slot and the protection given back', async () => {
    // The input fits the limit; the opt-out packet the mark adds does not.
    const small = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_MAX_UPLOAD_BYTES: String(photo.length + 16) } });
    try {
      const acct = await small.account();
      const id: string = (await openBatch({ size: 1, provenance: true }, acct.key, small)).json.id;
      const over = await markImage(id, photo, 'photo.jpg', 'image/jpeg', acct.key, small);
      expectError(over, 422, 'output_too_large');
      expectConforms(over, 'post', '/api/v1/dashboard/batches/{id}/images');
      expect((await small.usage(acct.name)).protect.used).toBe(0);
      // The slot is free again: a small image, which stays under the limit once marked, takes it.
      const ok = await markImage(id, await smallImage('jpeg', 64, 64), 'small.jpg', 'image/jpeg', acct.key, small);
      expect(ok.status, ok.body.toString().slice(0, 200)).toBe(200);
      expect(ok.json.bytes).toBeLessThanOrEqual(photo.length + 16);
      expect((await small.usage(acct.name)).protect.used).toBe(1);
    } finally {
      await small.dispose();
    }
  }, 60_000);

  it('counts toward the monthly protection limit: 429 with Retry-After past it', async () => {
    const limited = await server.account({ protect: 1 });
    const id: string = (await openBatch({ size: 3 }, limited.key)).json.id;
    expect((await markImage(id, photo, 'a.jpg', 'image/jpeg', limited.key)).status).toBe(200);
    const over = await markImage(id, photo, 'b.jpg', 'image/jpeg', limited.key);
    expectError(over, 429, 'quota_exceeded');
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expectConforms(over, 'post', '/api/v1/dashboard/batches/{id}/images');
    // ... the same counter /api/v1/protect draws on.
    expectError(await api(server, 'protect', limited.key, imageForm(photo)), 429, 'quota_exceeded');
  });
});

describe('Content Credentials (C2PA): the dashboard follows OPTMARK_C2PA as protect does', () => {
  const c2paFile = () => readFileSync(join(ROOT, '..', 'shared', 'corpus', 'c2pa_CA.jpg'));

  it('default (update): both layers, the credentials kept valid, the tag valid, the fingerprint present; said in the header, the field and a warning', async () => {
    const id: string = (await openBatch({ size: 2, provenance: true, fingerprint: true })).json.id;
    const a = await markImage(id, c2paFile(), 'c2pa_CA.jpg');
    expect(a.status, a.body.toString().slice(0, 300)).toBe(200);
    expectConforms(a, 'post', '/api/v1/dashboard/batches/{id}/images');
    expect(a.headers['optmark-content-credentials']).toBe('updated');
    expect(a.json.credentials).toBe('updated');
    expect(a.json.warnings.map((w: { code: string }) => w.code)).toEqual(['content_credentials_updated']);
    expect(a.json.before.c2pa).toEqual({ present: true, valid: true, trainingMining: null });
    expect(a.json.after).toMatchObject({
      optedOut: true,
      c2pa: { present: true, valid: true, trainingMining: 'notAllowed' },
      provenance: { present: true, valid: true },
      fingerprint: { present: true },
    });
    // A file without credentials: none, and no warning.
    const b = await markImage(id, photo, 'plain.jpg');
    expect(b.headers['optmark-content-credentials']).toBe('none');
    expect(b.json).toMatchObject({ credentials: 'none', warnings: [] });
  });

  it('OPTMARK_C2PA=refuse: 409 content_credentials_present, the slot and the protection given back', async () => {
    const refusing = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_C2PA: 'refuse' } });
    try {
      const acct = await refusing.account();
      const id: string = (await openBatch({ size: 1, provenance: true, fingerprint: true }, acct.key, refusing)).json.id;
      const refused = await markImage(id, c2paFile(), 'c2pa_CA.jpg', 'image/jpeg', acct.key, refusing);
      expectError(refused, 409, 'content_credentials_present');
      expectConforms(refused, 'post', '/api/v1/dashboard/batches/{id}/images');
      expect((await refusing.usage(acct.name)).protect.used).toBe(0);
      // The batch's one slot is free again: a file without credentials takes it.
      const ok = await markImage(id, photo, 'plain.jpg', 'image/jpeg', acct.key, refusing);
      expect(ok.status).toBe(200);
      expect(ok.json.credentials).toBe('none');
      expect((await refusing.usage(acct.name)).protect.used).toBe(1);
    } finally {
      await refusing.dispose();
    }
  }, 60_000);
});

describe('records', () => {
  let shas: string[] = [];
  beforeAll(async () => {
    const k = await server.account();
    key = k.key;
    account = k.name;
    const id: string = (await openBatch({ size: 3, provenance: true })).json.id;
    shas = [];
    for (const name of ['=cmd|calc.jpg', 'beach, sunset.jpg', 'Портрет πορτρέτο.jpg']) {
      const img = await sharp(photo)
        .jpeg({ quality: 80 + shas.length })
        .toBuffer(); // three different files
      const a = await markImage(id, img, name);
      expect(a.status).toBe(200);
      shas.push(a.json.sha256);
    }
  });

  it('list newest first, search by name or SHA-256 prefix, and page with the `next` cursor', async () => {
    const all = await get('/api/v1/dashboard/records');
    expectConforms(all, 'get', '/api/v1/dashboard/records');
    expect(all.json.records.map((r: { sha256: string }) => r.sha256)).toEqual([...shas].reverse());
    const byName = await get(`/api/v1/dashboard/records?q=${encodeURIComponent('sunset')}`);
    expect(byName.json.records.map((r: { originalName: string }) => r.originalName)).toEqual(['beach, sunset.jpg']);
    const bySha = await get(`/api/v1/dashboard/records?q=${shas[2]!.slice(0, 10)}`);
    expect(bySha.json.records.map((r: { sha256: string }) => r.sha256)).toEqual([shas[2]]);
    const wildcard = await get('/api/v1/dashboard/records?q=%25');
    expect(wildcard.json.records).toEqual([]); // '%' is a character here, not a LIKE wildcard
    const first = await get('/api/v1/dashboard/records?limit=2');
    expect(first.json.records).toHaveLength(2);
    expect(typeof first.json.next).toBe('string');
    const rest = await get(`/api/v1/dashboard/records?limit=2&cursor=${encodeURIComponent(first.json.next)}`);
    expectConforms(rest, 'get', '/api/v1/dashboard/records');
    expect(rest.json.records.map((r: { sha256: string }) => r.sha256)).toEqual([shas[0]]);
    expect(rest.json.next).toBeNull();
    // `before` is a time filter: only records strictly older than the newest.
    const older = await get(`/api/v1/dashboard/records?before=${encodeURIComponent(all.json.records[0].markedAt)}`);
    expect(older.json.records.map((r: { sha256: string }) => r.sha256)).toEqual(
      all.json.records.filter((r: { markedAt: string }) => r.markedAt < all.json.records[0].markedAt).map((r: { sha256: string }) => r.sha256),
    );
    for (const bad of ['not a cursor!', Buffer.from('yesterday|x').toString('base64url'), Buffer.from('2026-11-24T08:00:00.000Z|').toString('base64url')]) {
      expectError(await get(`/api/v1/dashboard/records?cursor=${encodeURIComponent(bad)}`), 400, 'invalid_request');
    }
    expectError(await get('/api/v1/dashboard/records?limit=0'), 400, 'invalid_request');
    expectError(await get('/api/v1/dashboard/records?before=yesterday'), 400, 'invalid_request');
  });

  it('export as CSV (quoted, formulas defused) and as JSON', async () => {
    const csv = await get('/api/v1/dashboard/records/export?format=csv');
    expect(csv.status).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.headers['content-disposition']).toMatch(/^attachment; filename="optmark-records-\d{4}-\d{2}-\d{2}\.csv"$/);
    const lines = csv.body.toString('utf8').trimEnd().split('\r\n');
    expect(lines[0]).toBe('marked_at,original_name,produced_name,mime_type,bytes,sha256,layers,key_prefix,provenance_key_id,batch_id,record_id');
    expect(lines).toHaveLength(4);
    expect(lines[2]).toContain(',"beach, sunset.jpg",');
    expect(lines[3]).toContain(`,'=cmd|calc.jpg,`);
    expect(lines[3]).toContain(`,${shas[0]},provenance,${key.slice(0, 16)},`);
    expect(lines[1]).toContain(',Портрет πορτρέτο.jpg,'); // UTF-8, as it was uploaded
    const json = await get(`/api/v1/dashboard/records/export?format=json&q=${encodeURIComponent('πορτρ')}`);
    expect(json.headers['content-type']).toBe('application/json');
    expect(json.json.records.map((r: { sha256: string }) => r.sha256)).toEqual([shas[2]]);
    expectError(await get('/api/v1/dashboard/records/export?format=xml'), 400, 'invalid_request');
  });

  it('the receipt is a PDF naming every file, its SHA-256, the layers and the provenance key id', async () => {
    const batches = await get('/api/v1/dashboard/records');
    const batchId: string = batches.json.records[0].batchId;
    const keyId: string = batches.json.records[0].provenanceKeyId;
    const a = await get(`/api/v1/dashboard/batches/${batchId}/receipt`);
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toBe('application/pdf');
    expect(a.body.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(a.body.subarray(-6).toString('latin1')).toMatch(/%%EOF\s*$/);
    const text = await pdfText(a.body);
    for (const sha of shas) expect(text).toContain(sha);
    // A name outside Latin-1 (Cyrillic, Greek) comes back from the reader's text extraction as it was.
    expect(text).toContain('Портрет πορτρέτο.jpg');
    expect(text).toContain(`Provenance key id: ${keyId}`);
    expect(text).toContain('Layers: provenance');
    expectError(await get('/api/v1/dashboard/batches/00000000-0000-4000-8000-000000000000/receipt'), 404, 'not_found');
  });
});
