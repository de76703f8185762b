// Uploads as networks and clients really deliver them: awkward chunk sizes, slow trickles, chunked
// encoding, clients that disconnect, and the size limits (413 before the body, cut-off without a length).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError, sha256 } from './helpers/assert.js';
import { jpegOfSize, smallImage } from './helpers/images.js';
import { TestServer, api, bodyAfterAnswer, heldUpload, imageForm, rawRequest, waitFor, type Multipart, type RawOptions } from './helpers/server.js';

const LIMIT = 26_214_400; // 25 MiB, the default
let server: TestServer;
let key: string;
let small: Buffer;
let medium: Buffer;

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2', OPTMARK_QUEUE_LENGTH: '32' } });
  ({ key } = await server.account());
  small = await smallImage('jpeg');
  medium = await jpegOfSize(300_000);
});
afterAll(async () => {
  await server?.dispose();
});

/** A raw upload of `form` to an endpoint with the test key, as `options` says. */
function upload(endpoint: 'protect' | 'verify', form: Multipart, options: Omit<RawOptions, 'path'> = {}, k: string | undefined = key) {
  const headers: Record<string, string> = { 'Content-Type': form.contentType, ...options.headers };
  if (k !== undefined) headers.Authorization = `Bearer ${k}`;
  return rawRequest(server.port, { body: form.body, ...options, headers, path: `/api/v1/${endpoint}` });
}

describe('awkward chunk sizes', () => {
  it.each([
    ['1-byte', 1, 'small'],
    ['7-byte', 7, 'small'],
    ['4093-byte', 4093, 'medium'],
    ['random (1..8192)', 'random', 'medium'],
    ['alternating 1 / 65536 / 3', [1, 65536, 3], 'medium'],
  ] as const)('%s chunks arrive intact (verify hashes exactly the bytes sent)', async (_name, chunks, which) => {
    const image = which === 'small' ? small : medium;
    const a = await upload('verify', imageForm(image), { chunks: chunks as RawOptions['chunks'] });
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.sha256).toBe(sha256(image));
    expectConforms(a, 'post', '/api/v1/verify');
  });

  it.each([
    ['7-byte', 7],
    ['random', 'random'],
  ] as const)('chunked transfer encoding with %s chunks', async (_name, chunks) => {
    const a = await upload('verify', imageForm(medium), { chunked: true, chunks: chunks as RawOptions['chunks'] });
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.sha256).toBe(sha256(medium));
  });

  it('protect gives the same bytes however the upload was cut', async () => {
    const whole = await api(server, 'protect', key, imageForm(small));
    const split = await upload('protect', imageForm(small), { chunks: 7 });
    expect(split.status).toBe(200);
    expect(split.json.sha256).toBe(whole.json.sha256);
    expect(split.json.imageBase64).toBe(whole.json.imageBase64);
  });

  it('a slow trickle (a chunk every few milliseconds) is received and answered', async () => {
    const a = await upload('verify', imageForm(small), { chunks: 97, delayMs: 15 });
    expect(a.status).toBe(200);
    expect(a.json.sha256).toBe(sha256(small));
  });

  it('several cut-up uploads at once do not mix their bytes', async () => {
    const images = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => jpegOfSize(20_000 + i * 7_919)));
    const answers = await Promise.all(images.map((img, i) => upload('verify', imageForm(img), { chunks: i % 2 ? 'random' : 1021, chunked: i % 3 === 0 })));
    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      expect(a.json.sha256).toBe(sha256(images[i]!));
    });
    await server.settled();
  });
});

describe('clients that go away', () => {
  it.each([
    ['after the headers', 0, 'end'],
    ['half-way through the body (FIN)', 150_000, 'end'],
    ['half-way through the body (RST)', 150_000, 'reset'],
  ] as const)('disconnect %s: memory and the request slot are freed, the unit is refunded', async (_name, after, how) => {
    const { name, key: k } = await server.account();
    // Hang up only once the server is handling the request (when any body is sent at all).
    const handled = () => server.readyzUntil('the request to be in flight', (r) => r.inflight.requests === 1);
    const a = await upload('protect', imageForm(medium), { abortAfter: after, abortHow: how, onProgress: handled }, k);
    expect(a.status).toBe(0);
    const ready = await server.settled();
    expect(ready.inflight).toMatchObject({ requests: 0, bytes: 0 });
    expect((await server.usage(name)).protect.used).toBe(0);
    expect((await api(server, 'protect', k, small)).status).toBe(200);
  });

  it('twenty aborted uploads in a row leave the server healthy', async () => {
    const big = imageForm(await jpegOfSize(2_000_000));
    await Promise.all(Array.from({ length: 20 }, (_, i) => upload('verify', big, { abortAfter: 50_000 * (i + 1), abortHow: i % 2 ? 'reset' : 'end' })));
    await server.settled();
    expect((await api(server, 'verify', key, small)).status).toBe(200);
  });
});

describe('size limits', () => {
  it('a declared Content-Length over the limit is answered 413 while the body is still unsent', async () => {
    const declared = 40 * 1024 * 1024;
    const form = imageForm(Buffer.concat([small.subarray(0, 2), Buffer.alloc(1024 * 1024)]));
    // Only 1 MiB is ever written: an answer can arrive only if the server did not wait for the 40 MiB.
    const a = await upload('protect', form, { contentLength: declared });
    expectError(a, 413, 'payload_too_large');
    expectConforms(a, 'post', '/api/v1/protect');
    expect(a.headers.ratelimit).toBeTruthy();
    expect(a.sentBeforeAnswer).toBeLessThan(declared);
    await server.settled();
  });

  it.each([
    ['401 without a key', 'multipart/form-data; boundary=x', 401, 'missing_api_key'],
    ['415 for a non-multipart body', 'application/octet-stream', 415, 'unsupported_media_type'],
  ])('%s is answered before the body too', async (_name, contentType, status, code) => {
    const a = await rawRequest(server.port, {
      path: '/api/v1/verify',
      headers: { 'Content-Type': contentType, ...(status === 401 ? {} : { Authorization: `Bearer ${key}` }) },
      body: Buffer.alloc(64 * 1024),
      contentLength: 40 * 1024 * 1024,
    });
    expectError(a, status, code);
  });

  it.each([
    ['401', {}, 401, 'missing_api_key'],
    ['415', { 'Content-Type': 'application/octet-stream' }, 415, 'unsupported_media_type'],
  ] as const)('%s answered from the headers: the body sent after it is read and dropped, and the connection serves on', async (_n, extra, status, code) => {
    // No reset: a server that closed with the body unread would have the kernel answer it with RST,
    // which can take the answer with it at the client.
    const form = imageForm(small);
    const r = await bodyAfterAnswer(server.port, {
      path: '/api/v1/protect',
      headers: { 'Content-Type': form.contentType, ...(status === 401 ? {} : { Authorization: `Bearer ${key}` }), ...extra },
      body: form.body,
    });
    expectError(r.first, status, code);
    expect([r.second.status, r.second.json, r.reset]).toEqual([200, { status: 'ok' }, false]);
  });

  it('an upload without a length is cut off with 413 once it passes the limit, though it never ends', async () => {
    // 27 MiB sent as chunks and no last chunk: only a server that stops at the limit can answer.
    const form = imageForm(Buffer.concat([small.subarray(0, 2), Buffer.alloc(27 * 1024 * 1024, 0x41)]));
    const id = 'chunked-oversize';
    const a = await upload('protect', form, { chunked: true, unterminated: true, chunks: 256 * 1024, headers: { 'X-Request-ID': id } });
    expectError(a, 413, 'payload_too_large');
    // The server read at most one chunk past the limit (plus the multipart slack) before refusing.
    const line = await waitFor('the request in the log', () => server.output.split('\n').find((l) => l.includes(`"reqId":"${id}"`)));
    expect(JSON.parse(line).in).toBeLessThanOrEqual(LIMIT + 64 * 1024 + 256 * 1024 + 64);
    await server.settled();
  });

  it('an image of exactly the limit is accepted; one byte more is 413, with or without a length', async () => {
    const atLimit = await jpegOfSize(LIMIT);
    const ok = await api(server, 'verify', key, imageForm(atLimit));
    expect(ok.status, ok.body.toString()).toBe(200);
    expect(ok.json.sha256).toBe(sha256(atLimit));

    const over = Buffer.concat([atLimit.subarray(0, LIMIT - 2), Buffer.from([0x00]), atLimit.subarray(LIMIT - 2)]);
    expect(over.length).toBe(LIMIT + 1);
    expectError(await api(server, 'verify', key, imageForm(over)), 413, 'payload_too_large');
    expectError(await upload('verify', imageForm(over), { chunked: true, chunks: 1024 * 1024 }), 413, 'payload_too_large');
    await server.settled();
  });
});

describe('a server with a 1 MiB upload limit and room for one upload in memory', () => {
  let tight: TestServer;
  let tightKey: string;
  beforeAll(async () => {
    // 5 MiB of request memory: one 900 kB protect takes its upload and room for its answer (the base64 of
    // the upload plus 1 MiB of allowed growth: about 3.5 MB in all), so a second one does not fit while
    // the first is held.
    tight = await TestServer.start({
      env: { OPTMARK_POOL_SIZE: '1', OPTMARK_MAX_UPLOAD_BYTES: String(1024 * 1024), OPTMARK_MAX_INFLIGHT_BYTES: String(5 * 1024 * 1024) },
    });
    ({ key: tightKey } = await tight.account());
  });
  afterAll(async () => {
    await tight?.dispose();
  });

  it('applies the configured limit, early for a declared length and at the byte for the image', async () => {
    expect((await api(tight, 'verify', tightKey, await jpegOfSize(1024 * 1024))).status).toBe(200);
    expectError(await api(tight, 'verify', tightKey, await jpegOfSize(1024 * 1024 + 1)), 413, 'payload_too_large');
    const early = await rawRequest(tight.port, {
      path: '/api/v1/verify',
      headers: { Authorization: `Bearer ${tightKey}`, 'Content-Type': 'multipart/form-data; boundary=x' },
      body: Buffer.alloc(1000),
      contentLength: 2 * 1024 * 1024,
    });
    expectError(early, 413, 'payload_too_large');
  });

  it('503 with Retry-After when the arena is taken by a held protect; fine again once it is free', async () => {
    const image = await jpegOfSize(900_000);
    const form = imageForm(image);
    // The first upload stops half-way and holds its memory until released.
    const first = heldUpload(
      tight.port,
      { path: '/api/v1/protect', headers: { Authorization: `Bearer ${tightKey}`, 'Content-Type': form.contentType }, body: form.body, chunks: 64 * 1024 },
      450_000,
    );
    await first.held;
    await tight.readyzUntil('the held upload to take memory', (r) => r.inflight.bytes > 0);
    const second = await api(tight, 'protect', tightKey, form);
    expectError(second, 503, 'overloaded');
    expect(second.headers['retry-after']).toMatch(/^\d+$/);
    expectConforms(second, 'post', '/api/v1/protect');
    first.release();
    const a = await first.answer;
    expect(a.status).toBe(200);
    expect(Buffer.from(a.json.imageBase64, 'base64').length).toBeGreaterThan(image.length);
    await tight.settled();
    expect((await api(tight, 'protect', tightKey, form)).status).toBe(200);
  });
});
