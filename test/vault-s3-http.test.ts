/**
 * `optmark serve` with OPTMARK_VAULT_URL on a real S3 API server (test/helpers/s3-server.ts): uploads and
 * downloads through the HTTP API land in the bucket under the prefix (nothing in the data directory),
 * deletes remove them, the log names the backend, and a bad URL stops the start with a clear message.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3_CREDENTIALS, S3TestServer } from './helpers/s3-server.js';
import { imageForm, request, TestServer } from './helpers/server.js';

const BUCKET = 'served-vault';
const PREFIX = `p-${randomBytes(3).toString('hex')}/objects`;

let s3: S3TestServer;
let server: TestServer;
let key: string;

const auth = (extra: Record<string, string> = {}) => ({ Authorization: `Bearer ${key}`, ...extra });

beforeAll(async () => {
  s3 = await S3TestServer.start([BUCKET]);
  server = await TestServer.start({
    env: {
      OPTMARK_POOL_SIZE: '1',
      OPTMARK_VAULT_URL: `s3://${BUCKET}/${PREFIX}`,
      OPTMARK_VAULT_S3_ENDPOINT: s3.endpoint,
      OPTMARK_VAULT_S3_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
    },
  });
  ({ key } = await server.account());
}, 60_000);
afterAll(async () => {
  await server?.stop();
  await s3?.stop();
});

describe('the Private Vault over HTTP on S3', () => {
  it('keeps uploads in the bucket, serves them whole and by range, and deletes them there', async () => {
    expect(server.output).toMatch(/"storage":"s3","bucket":"served-vault"/);
    const on = await request(server, '/api/v1/vault', {
      method: 'PUT',
      headers: auth({ 'Content-Type': 'application/json' }),
      body: Buffer.from('{"enabled":true}'),
    });
    expect(on.status).toBe(200);
    const img = await sharp({ create: { width: 300, height: 200, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 40 } } })
      .png()
      .toBuffer();
    expect(img.length).toBeGreaterThan(140_001);
    const form = imageForm(img, 'bank-statement.png', 'image/png');
    const made = await request(server, '/api/v1/vault/objects', { method: 'POST', headers: auth({ 'Content-Type': form.contentType }), body: form.body });
    expect(made.status).toBe(201);
    const names = await s3.names(BUCKET);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(new RegExp(`^${PREFIX}/[0-9a-f]{2}/[0-9a-f]{32}$`));
    const stored = await s3.read(BUCKET, names[0]!);
    expect(stored.includes(img.subarray(200, 232)) || stored.includes(Buffer.from('bank-statement'))).toBe(false);
    expect(existsSync(join(server.dataDir, 'vault'))).toBe(false);

    const whole = await request(server, `/api/v1/vault/objects/${made.json.id}/content`, { headers: auth() });
    expect(whole.status).toBe(200);
    expect(whole.body.equals(img)).toBe(true);
    const part = await request(server, `/api/v1/vault/objects/${made.json.id}/content`, { headers: auth({ Range: 'bytes=70000-140000' }) });
    expect(part.status).toBe(206);
    expect(part.body.equals(img.subarray(70000, 140001))).toBe(true);

    const del = await request(server, `/api/v1/vault/objects/${made.json.id}`, { method: 'DELETE', headers: auth() });
    expect(del.status).toBe(204);
    expect(await s3.names(BUCKET)).toEqual([]);
  });

  it('a bad OPTMARK_VAULT_URL stops the start and names the setting', async () => {
    const r = await TestServer.spawnOnce({ OPTMARK_VAULT_URL: 'https://bucket/prefix' });
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.output).toMatch(/OPTMARK_VAULT_URL.*s3:\/\//);
  });
});
