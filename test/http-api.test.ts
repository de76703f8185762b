// The API over real HTTP: every field of both endpoints, file names, the error matrix with its headers,
// request ids, and many requests at once; every answer is also checked against docs/openapi.json.
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RATE_LIMIT, RATE_LIMIT_POLICY, UUID, expectConforms, expectError, remaining, sha256 } from './helpers/assert.js';
import { EXT, GIF, MIME, smallImage, sniff, type Format } from './helpers/images.js';
import { TestServer, api, imageForm, multipart, request, waitFor, type Answer } from './helpers/server.js';

const FORMATS: Format[] = ['jpeg', 'png', 'webp'];
let server: TestServer;
let key: string;
const images = {} as Record<Format, Buffer>;

beforeAll(async () => {
  // A queue long enough for the concurrency test's burst (the full-queue 503 is tested in http-ops).
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2', OPTMARK_QUEUE_LENGTH: '64' } });
  ({ key } = await server.account());
  for (const f of FORMATS) images[f] = await smallImage(f);
});
afterAll(async () => {
  await server?.dispose();
});

const protect = (form: Parameters<typeof api>[3], k: string | undefined = key, headers?: Record<string, string>): Promise<Answer> =>
  api(server, 'protect', k, form, headers);
const verify = (form: Parameters<typeof api>[3], k: string | undefined = key, headers?: Record<string, string>): Promise<Answer> =>
  api(server, 'verify', k, form, headers);

/** The decoded pixels, to show protect kept every one. */
async function pixels(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).raw().toBuffer();
}

describe('images cut off in their pixel data (../shared/corpus)', () => {
  const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
  it.each([
    ['sharp_truncated.jpg', 'image/jpeg'],
    ['pillow_truncated_image.png', 'image/png'],
  ])('%s: marked and verified (200), each answer carrying the truncated_image_data warning', async (name, type) => {
    const bytes = readFileSync(join(CORPUS, name));
    const p = await protect(imageForm(bytes, name, type));
    expect(p.status, p.body.toString()).toBe(200);
    expectConforms(p, 'post', '/api/v1/protect');
    expect(p.json.warnings).toHaveLength(1);
    expect(p.json.warnings[0]).toMatchObject({ code: 'truncated_image_data', message: expect.stringContaining('cut off') });
    const v = await verify(imageForm(Buffer.from(p.json.imageBase64, 'base64'), name, type));
    expect(v.status).toBe(200);
    expectConforms(v, 'post', '/api/v1/verify');
    expect(v.json).toMatchObject({ optedOut: true });
    expect(v.json.warnings[0]).toMatchObject({ code: 'truncated_image_data' });
    // Where the cut leaves pixels libvips cannot decode (the PNG), the detector says it did not look.
    const rest = v.json.warnings.slice(1).map((w: { code: string }) => w.code);
    expect(rest).toEqual(v.json.fingerprint.blocks === 0 ? ['fingerprint_undecodable'] : []);
  });

  it('a whole image: verify answers an empty warnings array', async () => {
    const v = await verify(imageForm(images.jpeg));
    expectConforms(v, 'post', '/api/v1/verify');
    expect(v.json.warnings).toEqual([]);
  });
});

describe('protect: raw answers (Accept: image/*)', () => {
  it.each(FORMATS)('%s: the marked bytes themselves, with Content-Type, Content-Disposition, Repr-Digest and Optmark-Signals', async (format) => {
    const form = () => imageForm(images[format], `photo.${EXT[format]}`, MIME[format]);
    const raw = await protect(form(), key, { Accept: 'image/*' });
    expect(raw.status, raw.body.toString()).toBe(200);
    expect(raw.headers['content-type']).toBe(MIME[format]);
    expect(raw.headers['content-disposition']).toBe(`attachment; filename="photo.${EXT[format]}"`);
    expect(raw.headers['repr-digest']).toBe(`sha-256=:${createHash('sha256').update(raw.body).digest('base64')}:`);
    expect(raw.headers['optmark-signals']).toBe('iptc.dataMining');
    expect(sniff(raw.body)).toBe(format);
    // The same bytes the JSON answer carries in base64.
    const json = await protect(form(), key, { Accept: 'application/json' });
    expect(json.headers['content-type']).toBe('application/json');
    expect(Buffer.from(json.json.imageBase64, 'base64').equals(raw.body)).toBe(true);
  });

  it('the produced type too; JSON stays the default for */*, no Accept, and ties', async () => {
    const form = () => imageForm(images.png, 'p.png', 'image/png');
    expect((await protect(form(), key, { Accept: 'image/png' })).headers['content-type']).toBe('image/png');
    expect((await protect(form(), key, { Accept: '*/*' })).headers['content-type']).toBe('application/json');
    expect((await protect(form())).headers['content-type']).toBe('application/json');
    expect((await protect(form(), key, { Accept: 'application/json, image/*' })).headers['content-type']).toBe('application/json');
    expect((await protect(form(), key, { Accept: 'application/json;q=0.5, image/*' })).headers['content-type']).toBe('image/png');
  });

  it('errors stay JSON {error, code}', async () => {
    const a = await protect(imageForm(GIF, 'x.gif', 'image/gif'), key, { Accept: 'image/*' });
    expect(a.status).toBe(415);
    expect(a.headers['content-type']).toBe('application/json');
    expect(a.json.code).toBe('unsupported_format');
  });
});

describe('protect', () => {
  it.each(FORMATS)('%s: every field describes the produced bytes, which keep the pixels and carry the field', async (format) => {
    const a = await protect(imageForm(images[format], `holiday.${EXT[format]}`, MIME[format]));
    expect(a.status, a.body.toString()).toBe(200);
    expectConforms(a, 'post', '/api/v1/protect');
    expect(Object.keys(a.json).sort()).toEqual(['filename', 'imageBase64', 'mimeType', 'sha256', 'signals', 'warnings']);
    expect(a.json.warnings).toEqual([]);
    const produced = Buffer.from(a.json.imageBase64, 'base64');
    expect(produced.toString('base64')).toBe(a.json.imageBase64); // canonical base64, nothing lost
    expect(sha256(produced)).toBe(a.json.sha256);
    expect(a.json.sha256).not.toBe(sha256(images[format])); // of the produced bytes, not the upload
    expect(sniff(produced)).toBe(format);
    expect(a.json.mimeType).toBe(MIME[format]);
    expect(a.json.filename).toBe(`holiday.${EXT[format]}`);
    expect(a.json.signals).toEqual(['iptc.dataMining']);
    expect((await pixels(produced)).equals(await pixels(images[format]))).toBe(true);

    const v = await verify(imageForm(produced, a.json.filename, a.json.mimeType));
    expect(v.status).toBe(200);
    expect(v.json).toMatchObject({ optedOut: true, signals: ['iptc.dataMining'], sha256: a.json.sha256 });

    // Protecting a protected image changes nothing.
    const again = await protect(imageForm(produced, a.json.filename, a.json.mimeType));
    expect(again.json.sha256).toBe(a.json.sha256);
  });

  it('names and types the output by the bytes, not by the upload name or declared part type', async () => {
    const a = await protect(imageForm(images.png, 'looks-like.jpg', 'image/jpeg'));
    expect(a.status).toBe(200);
    expect(a.json.mimeType).toBe('image/png');
    expect(a.json.filename).toBe('looks-like.png');
  });

  it.each([
    ['plain', 'photo.jpg', 'photo.jpg'],
    ['unix path', '../../etc/passwd.jpg', 'passwd.jpg'],
    ['windows path', 'C:\\Users\\me\\My Pictures\\beach day.jpeg', 'beach day.jpg'],
    ['a tab', 'tab\there.jpg', 'tabhere.jpg'],
    ['characters unsafe in names', 'a<b>c:d*e?f|g.jpg', 'abcdefg.jpg'],
    ['leading dots', '...hidden.jpg', 'hidden.jpg'],
    ['dots only', '....jpg', 'image.jpg'],
    ['no extension', 'scan', 'scan.jpg'],
    ['too long', `${'x'.repeat(500)}.jpg`, `${'x'.repeat(100)}.jpg`],
  ])('file name, %s', async (_case, sent, expected) => {
    const a = await protect(imageForm(images.jpeg, sent));
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.filename).toBe(expected);
  });

  it('strips control characters that arrive percent-encoded (filename*, RFC 5987)', async () => {
    const b = '----ctl';
    const body = Buffer.concat([
      Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image"; filename*=UTF-8''bad%01na%07me%7F%C2%85.jpg\r\nContent-Type: image/jpeg\r\n\r\n`),
      images.jpeg,
      Buffer.from(`\r\n--${b}--\r\n`),
    ]);
    const a = await protect({ contentType: `multipart/form-data; boundary=${b}`, body });
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.filename).toBe('badname.jpg');
  });

  it.each([
    ['no filename', undefined],
    ['an empty filename', ''],
  ])('a file part with %s gets the default name', async (_case, filename) => {
    const a = await protect(
      multipart([{ name: 'image', ...(filename === undefined ? {} : { filename }), type: 'application/octet-stream', data: images.webp }]),
    );
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.filename).toBe('image.webp');
  });

  it('regression: a file name as browsers and curl encode it (%22, %0D, %0A) is decoded, as the quote sent escaped is', async () => {
    // Before: "my%22best%22.jpg" came back as the name, and in Content-Disposition as my_22best_22.jpg.
    const sent = 'my%22best%22 shot%0D%0A.jpg'; // a file named my"best" shot<CR><LF>.jpg, as Chromium sends it
    const b = '----names';
    const viaBusboy = Buffer.concat([
      // Another header in the part: the whole of the multipart parser's path, not the short cut.
      Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image"; filename="${sent}"\r\nContent-Type: image/jpeg\r\nX-Part: 1\r\n\r\n`),
      images.jpeg,
      Buffer.from(`\r\n--${b}--\r\n`),
    ]);
    const escaped = imageForm(images.jpeg, 'my\\"best\\" shot.jpg'); // RFC 7578 style: a backslash before the quote
    for (const form of [imageForm(images.jpeg, sent), { contentType: `multipart/form-data; boundary=${b}`, body: viaBusboy }, escaped]) {
      const a = await protect(form);
      expect(a.status, a.body.toString()).toBe(200);
      expect(a.json.filename).toBe('mybest shot.jpg');
      const raw = await protect(form, key, { Accept: 'image/*' });
      expect(raw.headers['content-disposition']).toBe('attachment; filename="mybest shot.jpg"');
    }
    // Only those three: any other percent sign is the name's own.
    expect((await protect(imageForm(images.jpeg, '100%41 %2522%0a.jpg'))).json.filename).toBe('100%41 %2522%0a.jpg');
  });

  it('regression: keeps a UTF-8 file name as the client wrote it', async () => {
    const a = await protect(imageForm(images.jpeg, 'café 東京.jpg'));
    expect(a.status).toBe(200);
    expect(a.json.filename).toBe('café 東京.jpg');
  });
});

describe('multipart as clients write it', () => {
  it.each<[string, (f: { contentType: string; body: Buffer }) => { contentType: string; body: Buffer }]>([
    ['a preamble before the first boundary', (f) => ({ ...f, body: Buffer.concat([Buffer.from('This is a preamble.\r\n'), f.body]) })],
    ['an epilogue after the last boundary', (f) => ({ ...f, body: Buffer.concat([f.body, Buffer.from('This is an epilogue.\r\n')]) })],
    ['a quoted boundary parameter', (f) => ({ ...f, contentType: f.contentType.replace(/boundary=(.*)$/, 'boundary="$1"') })],
    ['a media type in capitals', (f) => ({ ...f, contentType: f.contentType.replace('multipart/form-data', 'Multipart/Form-Data') })],
  ])('%s', async (_case, change) => {
    const a = await verify(change(imageForm(images.png, 'a.png', 'image/png')));
    expect(a.status, a.body.toString()).toBe(200);
    expect(a.json.sha256).toBe(sha256(images.png));
  });
});

describe('verify', () => {
  it.each(FORMATS)('%s: every field, for an image without the opt-out field', async (format) => {
    const a = await verify(imageForm(images[format], `x.${EXT[format]}`, MIME[format]));
    expect(a.status, a.body.toString()).toBe(200);
    expectConforms(a, 'post', '/api/v1/verify');
    expect(a.json).toEqual({
      optedOut: false,
      signals: [],
      provenance: { present: expect.any(Boolean), valid: expect.any(Boolean), verifiable: expect.any(Boolean) },
      fingerprint: { present: expect.any(Boolean), confidence: expect.any(Number), blocks: expect.any(Number) },
      sha256: sha256(images[format]), // of the upload
      warnings: [],
      c2pa: { present: false, valid: false, trainingMining: null },
      otherSignals: [],
      record: null, // additive: no dashboard record of these bytes (test/dashboard.test.ts)
    });
    expect(a.json.provenance.present).toBe(false);
    expect(Number.isInteger(a.json.fingerprint.blocks)).toBe(true);
  });

  it('Content Credentials (corpus CAWG file): c2pa and otherSignals reported by the workers, optedOut still the IPTC rule', async () => {
    const file = readFileSync(join(__dirname, '..', '..', 'shared', 'corpus', 'c2pa_C_with_CAWG_data.jpg'));
    const a = await verify(imageForm(file, 'cawg.jpg', 'image/jpeg'));
    expect(a.status, a.body.toString()).toBe(200);
    expectConforms(a, 'post', '/api/v1/verify');
    expect(a.json.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
    expect(a.json.otherSignals).toEqual(['c2pa.trainingMining']);
    expect(a.json.optedOut).toBe(false);
    expect(a.json.signals).toEqual([]);
  }, 60_000);
});

describe('verify when the detector cannot run', () => {
  // A fingerprint secret that cannot be read (here: the data directory's, too short, as a file caught
  // half-written would be; one that OPTMARK_FINGERPRINT_SECRET_FILE names stops the start instead).
  // verify answered 200 with the fingerprint "not found", as if the detector had looked.
  let broken: TestServer;
  let brokenKey: string;
  let brokenAccount: string;
  let dataDir: string;
  let secretFile: string;
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'optmark-secret-'));
    secretFile = join(dataDir, 'fingerprint.key');
    writeFileSync(secretFile, Buffer.alloc(4, 7), { mode: 0o600 });
    broken = await TestServer.start({ dataDir, env: { OPTMARK_POOL_SIZE: '1' } });
    ({ key: brokenKey, name: brokenAccount } = await broken.account());
  });
  afterAll(async () => {
    await broken?.dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('503 fingerprint_unavailable with Retry-After, no unit counted; ?fingerprint=skip still answers; served once the secret reads', async () => {
    const a = await api(broken, 'verify', brokenKey, images.jpeg, { 'X-Request-ID': 'secret-unreadable-1' });
    expectError(a, 503, 'fingerprint_unavailable');
    expectConforms(a, 'post', '/api/v1/verify');
    expect(Number(a.headers['retry-after'])).toBeGreaterThan(0);
    expect(a.body.toString()).not.toContain(secretFile);
    // The operator learns why, under the request id.
    await waitFor('the reason in the server log', () => (/"reqId":"secret-unreadable-1".*too short/.test(broken.output) ? true : undefined));
    expect((await broken.usage(brokenAccount)).verify.used).toBe(0);

    const form = imageForm(images.jpeg);
    const skipped = await request(broken, '/api/v1/verify?fingerprint=skip', {
      method: 'POST',
      headers: { Authorization: `Bearer ${brokenKey}`, 'Content-Type': form.contentType },
      body: form.body,
    });
    expect(skipped.status, skipped.body.toString()).toBe(200);
    expect(skipped.json.fingerprint).toEqual({ present: false, confidence: 0, blocks: 0 });

    // The secret is read again on the next call: no restart needed (an image large enough to be examined).
    writeFileSync(secretFile, Buffer.alloc(32, 7));
    const v = await api(broken, 'verify', brokenKey, await smallImage('jpeg', 384, 256));
    expect(v.status, v.body.toString()).toBe(200);
    expect(v.json.fingerprint.blocks).toBeGreaterThan(0);
    expect((await broken.usage(brokenAccount)).verify.used).toBe(2);
  }, 60_000);
});

describe('error matrix', () => {
  let freeKey: string;
  let revokedKey: string;
  beforeAll(async () => {
    ({ key: freeKey } = await server.account({ plan: 'free' }));
    ({ key: revokedKey } = await server.account());
    await server.cliOk('key', 'revoke', revokedKey);
  });

  const unknownKey = `om_live_${'A'.repeat(43)}`;
  it.each([
    ['no Authorization header', undefined, 'missing_api_key', 'Bearer realm="optmark"'],
    ['an empty bearer token', 'Bearer ', 'missing_api_key', 'Bearer realm="optmark"'],
    ['another scheme', 'Basic dXNlcjpwYXNz', 'invalid_api_key', 'Bearer realm="optmark", error="invalid_token"'],
    ['a malformed key', 'Bearer not-a-key', 'invalid_api_key', 'Bearer realm="optmark", error="invalid_token"'],
    ['an unknown key', `Bearer ${unknownKey}`, 'invalid_api_key', 'Bearer realm="optmark", error="invalid_token"'],
  ])('401 for %s, with WWW-Authenticate: Bearer', async (_case, authorization, code, challenge) => {
    const form = imageForm(images.jpeg);
    const headers: Record<string, string> = { 'Content-Type': form.contentType };
    if (authorization !== undefined) headers.Authorization = authorization;
    for (const endpoint of ['protect', 'verify']) {
      const a = await request(server, `/api/v1/${endpoint}`, { method: 'POST', headers, body: form.body });
      expectError(a, 401, code);
      expect(a.headers['www-authenticate']).toBe(challenge);
      expectConforms(a, 'post', `/api/v1/${endpoint}`);
    }
  });

  it('401 for a revoked key', async () => {
    const a = await protect(images.jpeg, revokedKey);
    expectError(a, 401, 'invalid_api_key');
    expect(a.headers['www-authenticate']).toMatch(/^Bearer /);
  });

  it('403 for an account whose plan has no API access', async () => {
    const a = await verify(images.jpeg, freeKey);
    expectError(a, 403, 'plan_required');
    expectConforms(a, 'post', '/api/v1/verify');
  });

  const b = '----matrix';
  const head = (name: string, filename?: string, type?: string): string =>
    `--${b}\r\nContent-Disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n`;
  const cases: Array<[string, () => { contentType: string; body: Buffer }, number, string]> = [
    ['a GIF', () => imageForm(GIF, 'a.gif', 'image/gif'), 415, 'unsupported_format'],
    ['text bytes declared as PNG', () => imageForm(Buffer.from('hello, not an image '.repeat(20)), 'a.png', 'image/png'), 415, 'unsupported_format'],
    ['an empty image part', () => imageForm(Buffer.alloc(0)), 415, 'unsupported_format'],
    ['an image part of type text/plain', () => imageForm(images.jpeg, 'a.txt', 'text/plain'), 415, 'unsupported_media_type'],
    [
      'an image part without a type (text/plain by RFC 7578)',
      () => multipart([{ name: 'image', filename: 'a.jpg', data: images.jpeg }]),
      415,
      'unsupported_media_type',
    ],
    ['an empty body', () => ({ contentType: 'multipart/form-data; boundary=x', body: Buffer.alloc(0) }), 400, 'malformed_multipart'],
    ['a JSON body', () => ({ contentType: 'application/json', body: Buffer.from('{"image":1}') }), 415, 'unsupported_media_type'],
    ['a urlencoded body', () => ({ contentType: 'application/x-www-form-urlencoded', body: Buffer.from('image=1') }), 415, 'unsupported_media_type'],
    ['no image part, another field only', () => multipart([{ name: 'note', data: 'hello' }]), 400, 'unexpected_part'],
    ['no part at all', () => ({ contentType: `multipart/form-data; boundary=${b}`, body: Buffer.from(`--${b}--\r\n`) }), 400, 'missing_image'],
    ['the image as a text field', () => multipart([{ name: 'image', data: 'not a file' }]), 400, 'missing_image'],
    [
      'two image parts',
      () =>
        multipart([
          { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: images.jpeg },
          { name: 'image', filename: 'b.jpg', type: 'image/jpeg', data: images.jpeg },
        ]),
      400,
      'too_many_parts',
    ],
    [
      'an extra file part',
      () =>
        multipart([
          { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: images.jpeg },
          { name: 'thumb', filename: 'b.jpg', type: 'image/jpeg', data: images.jpeg },
        ]),
      400,
      'unexpected_part',
    ],
    [
      'an extra text field',
      () =>
        multipart([
          { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: images.jpeg },
          { name: 'note', data: 'hi' },
        ]),
      400,
      'unexpected_part',
    ],
    ['multipart without a boundary', () => ({ contentType: 'multipart/form-data', body: imageForm(images.jpeg).body }), 400, 'malformed_multipart'],
    [
      'a body cut before its closing boundary',
      () => ({ contentType: `multipart/form-data; boundary=${b}`, body: Buffer.concat([Buffer.from(head('image', 'a.jpg', 'image/jpeg')), images.jpeg]) }),
      400,
      'malformed_multipart',
    ],
    [
      'a body whose boundary is not the declared one',
      () => ({ contentType: 'multipart/form-data; boundary=other', body: imageForm(images.jpeg).body }),
      400,
      'malformed_multipart',
    ],
    [
      // Regression: busboy never finished this form; the request was held until the client gave up.
      'a form whose image data holds the boundary and a cut copy of it',
      () => multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: `--${b}\r\n--${b.slice(0, -1)}` }], b),
      400,
      'malformed_multipart',
    ],
    ['a JPEG cut inside its headers', () => imageForm(images.jpeg.subarray(0, 30)), 422, 'damaged_image'],
  ];
  it.each(cases)('%s', async (_case, make, status, code) => {
    const form = make();
    for (const endpoint of ['protect', 'verify'] as const) {
      const a = await api(server, endpoint, key, form);
      expectError(a, status, code);
      expectConforms(a, 'post', `/api/v1/${endpoint}`);
      // Answers after authentication carry the rate-limit fields.
      expect(a.headers.ratelimit).toMatch(RATE_LIMIT);
      expect(a.headers['ratelimit-policy']).toMatch(RATE_LIMIT_POLICY);
    }
  });

  it('a 415 for an image part without a type says why and what to send (Python requests sends a file so)', async () => {
    const untyped = await api(server, 'protect', key, multipart([{ name: 'image', filename: 'a.jpg', data: images.jpeg }]));
    expectError(untyped, 415, 'unsupported_media_type');
    expect(untyped.json.error).toBe(
      'The "image" part is text/plain (a part without a Content-Type header counts as text/plain); send it as image/jpeg, image/png or image/webp.',
    );
    const typed = await api(server, 'protect', key, imageForm(images.jpeg, 'a.pdf', 'application/pdf'));
    expect(typed.json.error).toBe('The "image" part is application/pdf; send it as image/jpeg, image/png or image/webp.');
  });

  it.each([
    ['GET', '/api/v1/nothing-here', 404, 'not_found'],
    ['POST', '/api/v2/protect', 404, 'not_found'],
    ['GET', '/nothing/here', 404, 'not_found'], // '/' is the dashboard (test/dashboard.test.ts)
    ['GET', '/api/v1/protect', 405, 'method_not_allowed'],
    ['PUT', '/api/v1/verify', 405, 'method_not_allowed'],
    ['DELETE', '/api/v1/protect', 405, 'method_not_allowed'],
    // Regression: the GET routes answered another method 404 "No route for PUT /healthz." (README: a wrong
    // method on a route is 405 with Allow).
    ['PUT', '/healthz', 405, 'method_not_allowed'],
    ['POST', '/readyz', 405, 'method_not_allowed'],
    ['DELETE', '/metrics', 405, 'method_not_allowed'],
    ['POST', '/api/v1/openapi.json', 405, 'method_not_allowed'],
    ['POST', '/', 405, 'method_not_allowed'],
    ['PUT', '/index.html', 405, 'method_not_allowed'],
    ['DELETE', '/assets/index.js', 405, 'method_not_allowed'],
    ['POST', '/api/v1/dashboard/records', 405, 'method_not_allowed'],
  ])('%s %s: %i %s', async (method, path, status, code) => {
    const a = await request(server, path, { method, headers: { Authorization: `Bearer ${key}` } });
    expectError(a, status, code);
    if (status === 405) expect(a.headers.allow).toBe(path.startsWith('/api/v1/protect') || path.startsWith('/api/v1/verify') ? 'POST' : 'GET, HEAD');
  });

  it('500 carries no internals, and the server keeps serving', async () => {
    // Hide the counters table from the running server: its next reservation fails in SQLite.
    const db = new Database(join(server.dataDir, 'optmark.db'));
    db.exec('ALTER TABLE usage_counters RENAME TO usage_counters_hidden');
    let a: Answer;
    try {
      a = await protect(images.jpeg, key, { 'X-Request-ID': 'hidden-table-1' });
    } finally {
      db.exec('ALTER TABLE usage_counters_hidden RENAME TO usage_counters');
      db.close();
    }
    expectError(a, 500, 'internal_error');
    expectConforms(a, 'post', '/api/v1/protect');
    expect(a.json.error).toBe('Something went wrong on the server.');
    expect(a.body.toString()).not.toMatch(/sqlite|usage_counters|at |\.js/i);
    // The operator gets the details, under the request id.
    await waitFor('the failure in the server log', () => (/"reqId":"hidden-table-1".*usage_counters/.test(server.output) ? true : undefined));
    expect((await protect(images.jpeg)).status).toBe(200);
  });

  it('regression: a store failure during authentication is a 500, not a crash of the server', async () => {
    const db = new Database(join(server.dataDir, 'optmark.db'));
    db.exec('ALTER TABLE api_keys RENAME TO api_keys_hidden');
    let a: Answer;
    try {
      a = await verify(images.jpeg);
    } finally {
      db.exec('ALTER TABLE api_keys_hidden RENAME TO api_keys');
      db.close();
    }
    expectError(a, 500, 'internal_error');
    expect(server.running).toBe(true);
    expect((await verify(images.jpeg)).status).toBe(200);
  });
});

describe('headers', () => {
  it('reuses a valid X-Request-ID and replaces an unusable one, on successes and failures', async () => {
    const mine = 'client-42.batch_7:item@3';
    expect((await verify(images.jpeg, key, { 'X-Request-ID': mine })).headers['x-request-id']).toBe(mine);
    expect((await verify(images.jpeg, undefined, { 'X-Request-ID': mine })).headers['x-request-id']).toBe(mine);
    expect((await request(server, '/healthz', { headers: { 'X-Request-ID': mine } })).headers['x-request-id']).toBe(mine);
    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon', '']) {
      const a = await verify(images.jpeg, key, bad ? { 'X-Request-ID': bad } : {});
      expect(a.headers['x-request-id']).toMatch(UUID);
    }
    const ids = await Promise.all([1, 2, 3].map(async () => (await request(server, '/healthz')).headers['x-request-id']));
    expect(new Set(ids).size).toBe(3);
  });

  it('RateLimit and RateLimit-Policy on every answer after authentication, per operation', async () => {
    const p = await protect(images.jpeg);
    expect(p.headers['ratelimit-policy']).toMatch(/^"protect";q=10000;w=\d+$/);
    expect(p.headers.ratelimit).toMatch(/^"protect";r=\d+;t=\d+$/);
    const v = await verify(images.jpeg);
    expect(v.headers['ratelimit-policy']).toMatch(/^"verify";q=50000;w=\d+$/);
    const w = Number(/w=(\d+)/.exec(v.headers['ratelimit-policy']!)![1]);
    const t = Number(/t=(\d+)/.exec(v.headers.ratelimit!)![1]);
    expect(w).toBeGreaterThanOrEqual(28 * 86400);
    expect(w).toBeLessThanOrEqual(31 * 86400);
    expect(t).toBeLessThanOrEqual(w);
    // The counter moves by one per success.
    expect(remaining(await protect(images.jpeg))).toBe(remaining(p) - 1);
  });

  it('Server-Timing gives the receive, queue and work phases of answers that reached them, within the elapsed time', async () => {
    const { parseServerTiming } = await import('../src/http/timing.js');
    for (const call of [protect, verify]) {
      const t0 = performance.now();
      const a = await call(images.jpeg);
      const elapsed = performance.now() - t0;
      expect(a.status).toBe(200);
      expect(a.headers['server-timing']).toMatch(/^receive;dur=\d+\.\d\d, queue;dur=\d+\.\d\d, work;dur=\d+\.\d\d$/);
      const t = parseServerTiming(a.headers['server-timing']!);
      expect(Object.keys(t)).toEqual(['receive', 'queue', 'work']);
      expect(t.work!).toBeGreaterThan(0);
      expect(t.receive! + t.queue! + t.work!).toBeLessThanOrEqual(elapsed);
    }
    // A worker's refusal went through every phase; a refusal from the headers alone reached none.
    const gif = await protect(imageForm(GIF, 'a.gif', 'image/gif'));
    expect(gif.status).toBe(415);
    expect(Object.keys(parseServerTiming(gif.headers['server-timing'] ?? ''))).toEqual(['receive', 'queue', 'work']);
    const anonymous = await protect(images.jpeg, `om_live_${'A'.repeat(43)}`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['server-timing']).toBeUndefined();
  });

  it("regression: a failed call's RateLimit shows its unit already given back", async () => {
    const { key: fresh } = await server.account({ protect: 10 });
    const failed = await protect(imageForm(GIF, 'a.gif', 'image/gif'), fresh);
    expect(failed.status).toBe(415);
    expect(remaining(failed)).toBe(10);
    const ok = await protect(images.jpeg, fresh);
    expect(remaining(ok)).toBe(9);
  });
});

describe('concurrency', () => {
  it('many requests at once all get their own right answer', async () => {
    const jobs = Array.from({ length: 40 }, (_, i) => {
      const format = FORMATS[i % 3]!;
      const endpoint = i % 2 === 0 ? 'protect' : 'verify';
      return { i, format, endpoint } as const;
    });
    const answers = await Promise.all(
      jobs.map(({ i, format, endpoint }) =>
        api(server, endpoint, key, imageForm(images[format], `job-${i}.${EXT[format]}`, MIME[format]), { 'X-Request-ID': `job-${i}` }),
      ),
    );
    for (const [n, a] of answers.entries()) {
      const { i, format, endpoint } = jobs[n]!;
      expect(a.status, a.body.toString()).toBe(200);
      expect(a.headers['x-request-id']).toBe(`job-${i}`);
      if (endpoint === 'protect') {
        expect(a.json.filename).toBe(`job-${i}.${EXT[format]}`);
        expect(sha256(Buffer.from(a.json.imageBase64, 'base64'))).toBe(a.json.sha256);
      } else {
        expect(a.json.sha256).toBe(sha256(images[format]));
      }
    }
    await server.settled();
  });
});
