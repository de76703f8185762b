/**
 * Content Credentials through the HTTP API (issue #21): every protect answer says what happened to the
 * image's credentials (Optmark-Content-Credentials, and a warning when something did); the default
 * mode adds a signed update manifest, JSON and raw alike; OPTMARK_C2PA=refuse answers 409
 * content_credentials_present and counts nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError, remaining } from '../helpers/assert.js';
import { smallImage } from '../helpers/images.js';
import { TestServer, api, imageForm } from '../helpers/server.js';

const CORPUS = join(import.meta.dirname, '..', '..', '..', 'shared', 'corpus');
const haveCorpus = existsSync(join(CORPUS, 'c2pa_CA.jpg'));

let server: TestServer;
let key: string;
beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1' } });
  ({ key } = await server.account());
}, 60_000);
afterAll(async () => {
  await server?.dispose();
});

describe('protect on a file with Content Credentials (default OPTMARK_C2PA=update)', () => {
  it.runIf(haveCorpus)(
    'JSON and raw: updated, with the warning; verify of the output: optedOut, credentials valid, notAllowed',
    async () => {
      const input = readFileSync(join(CORPUS, 'c2pa_CA.jpg'));
      const p = await api(server, 'protect', key, imageForm(input, 'c2pa_CA.jpg'));
      expect(p.status, p.body.toString()).toBe(200);
      expectConforms(p, 'post', '/api/v1/protect');
      expect(p.headers['optmark-content-credentials']).toBe('updated');
      expect(p.json.warnings.map((w: { code: string }) => w.code)).toEqual(['content_credentials_updated']);
      const out = Buffer.from(p.json.imageBase64, 'base64');
      const v = await api(server, 'verify', key, imageForm(out, 'c2pa_CA.jpg'));
      expect(v.json).toMatchObject({ optedOut: true, c2pa: { present: true, valid: true, trainingMining: 'notAllowed' }, warnings: [] });
      expect(v.json.otherSignals).toContain('c2pa.trainingMining');

      const raw = await api(server, 'protect', key, imageForm(input, 'c2pa_CA.jpg'), { Accept: 'image/*' });
      expect(raw.status).toBe(200);
      expect(raw.headers['optmark-content-credentials']).toBe('updated');
      expect(raw.headers['optmark-warnings']).toBe('content_credentials_updated');
    },
    60_000,
  );

  it('a file without credentials: Optmark-Content-Credentials none, no warning', async () => {
    const p = await api(server, 'protect', key, imageForm(await smallImage('jpeg')));
    expect(p.status).toBe(200);
    expect(p.headers['optmark-content-credentials']).toBe('none');
    expect(p.json.warnings).toEqual([]);
  });
});

describe('OPTMARK_C2PA=refuse', () => {
  it.runIf(haveCorpus)(
    '409 content_credentials_present, the unit given back; files without credentials are marked',
    async () => {
      const refusing = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_C2PA: 'refuse' } });
      try {
        const { key: k } = await refusing.account();
        const plain = await api(refusing, 'protect', k, imageForm(await smallImage('png'), 'a.png', 'image/png'));
        expect(plain.status).toBe(200);
        const left = remaining(plain);
        const p = await api(refusing, 'protect', k, imageForm(readFileSync(join(CORPUS, 'c2pa_C_with_CAWG_data.jpg'))));
        expectError(p, 409, 'content_credentials_present');
        expectConforms(p, 'post', '/api/v1/protect');
        expect(remaining(p)).toBe(left);
      } finally {
        await refusing.dispose();
      }
    },
    60_000,
  );
});

describe('the signing identity at start', () => {
  it('a key file without its chain stops the start with a message naming both settings', async () => {
    const { code, output } = await TestServer.spawnOnce({ OPTMARK_C2PA_KEY_FILE: '/nonexistent/c2pa-key.pem' });
    expect(code).not.toBe(0);
    expect(output).toContain('configuration error: OPTMARK_C2PA_KEY_FILE: set, but OPTMARK_C2PA_CERT_FILE is not: set both or neither');
    expect(code).toBe(78);
  }, 60_000);
});
