/**
 * The dashboard's "Keep originals in my vault" (issue #39 point 2): an image marked with `?vault=keep`
 * keeps its original (the exact bytes uploaded) and its marked file (the exact bytes answered) in the
 * account's vault, both linked to the mark's record; without the vault on the mark is refused
 * vault_disabled and uses no batch slot; past the vault's limit the mark fails and leaves nothing behind.
 */
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assert.js';
import { type Answer, imageForm, request, TestServer } from './helpers/server.js';

let server: TestServer;
let key: string;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const auth = (k = key): Record<string, string> => ({ Authorization: `Bearer ${k}` });
const post = (path: string, body: Buffer, contentType: string, k = key): Promise<Answer> =>
  request(server, path, { method: 'POST', headers: { ...auth(k), 'Content-Type': contentType }, body });
const setVault = (enabled: boolean, k = key) =>
  request(server, '/api/v1/vault', {
    method: 'PUT',
    headers: { ...auth(k), 'Content-Type': 'application/json' },
    body: Buffer.from(JSON.stringify({ enabled })),
  });
const openBatch = async (k = key): Promise<string> => (await post('/api/v1/dashboard/batches', Buffer.from('{"size": 3}'), 'application/json', k)).json.id;
const markInto = (batch: string, image: Buffer, name: string, query = '?vault=keep', k = key) => {
  const form = imageForm(image, name);
  return post(`/api/v1/dashboard/batches/${batch}/images${query}`, form.body, form.contentType, k);
};

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1' } });
  ({ key } = await server.account());
}, 60_000);
afterAll(() => server?.dispose());

describe('marking in the dashboard with the vault', () => {
  it('keeps the original and the marked file, byte for byte, linked to the record', async () => {
    await setVault(true);
    const original = await sharp({ create: { width: 200, height: 150, channels: 3, noise: { type: 'gaussian', mean: 120, sigma: 40 } } })
      .jpeg()
      .toBuffer();
    const batch = await openBatch();
    const a = await markInto(batch, original, 'harbour.jpg');
    expect(a.status).toBe(200);
    const marked = Buffer.from(a.json.imageBase64, 'base64');
    const recordId = a.json.record.id;
    const list = await request(server, `/api/v1/vault/objects?record=${recordId}`, { headers: auth() });
    const byKind = Object.fromEntries(list.json.objects.map((o: { kind: string }) => [o.kind, o]));
    expect(Object.keys(byKind).sort()).toEqual(['marked', 'original']);
    expect(byKind.original).toMatchObject({ name: 'harbour.jpg', sha256: sha(original), bytes: original.length, mimeType: 'image/jpeg', record: recordId });
    expect(byKind.marked).toMatchObject({ name: a.json.filename, sha256: sha(marked), bytes: marked.length, record: recordId });
    for (const [kind, bytes] of [
      ['original', original],
      ['marked', marked],
    ] as const) {
      const got = await request(server, `/api/v1/vault/objects/${byKind[kind].id}/content`, { headers: auth() });
      expect(got.body.equals(bytes)).toBe(true);
    }
    expect((await request(server, '/api/v1/vault', { headers: auth() })).json).toMatchObject({ usedBytes: original.length + marked.length, objects: 2 });
    // Without the query, nothing more is kept.
    const b = await markInto(batch, await sharp(original).rotate(90).jpeg().toBuffer(), 'other.jpg', '');
    expect(b.status).toBe(200);
    expect((await request(server, '/api/v1/vault', { headers: auth() })).json.objects).toBe(2);
    expectError(await markInto(batch, original, 'x.jpg', '?vault=maybe'), 400, 'invalid_query');
  });

  it('with the vault off: vault_disabled, and the batch slot is not used', async () => {
    const { key: k } = await server.account();
    const batch = await openBatch(k);
    const img = await sharp({ create: { width: 40, height: 40, channels: 3, background: '#884422' } })
      .png()
      .toBuffer();
    expectError(await markInto(batch, img, 'a.png', '?vault=keep', k), 409, 'vault_disabled');
    const view = await request(server, `/api/v1/dashboard/batches/${batch}`, { headers: auth(k) });
    expect(view.json.used).toBe(0);
    expect(view.json.records).toEqual([]);
  });

  it('past the vault limit: the mark fails vault_quota_exceeded, no record, no object, the slot back', async () => {
    const { name, key: k } = await server.account();
    await setVault(true, k);
    const limited = await server.cli('account', 'set-limits', name, '--vault', '1000');
    expect(limited.status, limited.stderr).toBe(0);
    expect(limited.stdout).toContain('vault limit');
    const batch = await openBatch(k);
    const img = await sharp({ create: { width: 300, height: 300, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 50 } } })
      .png()
      .toBuffer();
    expectError(await markInto(batch, img, 'big.png', '?vault=keep', k), 413, 'vault_quota_exceeded');
    const view = await request(server, `/api/v1/dashboard/batches/${batch}`, { headers: auth(k) });
    expect(view.json.used).toBe(0);
    expect(view.json.records).toEqual([]);
    expect((await request(server, '/api/v1/vault', { headers: auth(k) })).json).toMatchObject({ usedBytes: 0, objects: 0, limitBytes: 1000 });
  });
});
