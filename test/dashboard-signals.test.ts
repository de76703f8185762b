/**
 * The dashboard's TDMRep and Content Credentials layers over HTTP (a real server, uWS and workers): a
 * batch opened with both marks JPEG, PNG and WebP through the layer path; each output is read by verify
 * (the answer's `after`, and POST /api/v1/verify) and by the reference C2PA reader (c2pa-rs as wasm),
 * and the batch, its records and its receipt name the layers.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError } from './helpers/assert.js';
import { read } from './helpers/c2pa.js';
import { pdfText } from './helpers/pdf.js';
import { TestServer, imageForm, request, type Answer } from './helpers/server.js';

const POLICY = 'https://example.org/tdm-policy';
const NOT_ALLOWED = { use: 'notAllowed' };
const FORMATS = [
  ['jpeg', 'jpg', 'image/jpeg'],
  ['png', 'png', 'image/png'],
  ['webp', 'webp', 'image/webp'],
] as const;

let server: TestServer;
let key: string;
const images = new Map<string, Buffer>();

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_TDM_POLICY: POLICY } });
  ({ key } = await server.account());
  const base = sharp({ create: { width: 320, height: 240, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 35 } } });
  images.set('jpg', await base.clone().jpeg().toBuffer());
  images.set('png', await base.clone().png().toBuffer());
  images.set('webp', await base.clone().webp().toBuffer());
});
afterAll(async () => {
  await server?.dispose();
});

const auth = (): Record<string, string> => ({ Authorization: `Bearer ${key}` });
const post = (path: string, body: Buffer, contentType: string): Promise<Answer> =>
  request(server, path, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': contentType }, body });
const openBatch = (spec: unknown): Promise<Answer> => post('/api/v1/dashboard/batches', Buffer.from(JSON.stringify(spec)), 'application/json');

describe('the dashboard with the TDMRep and Content Credentials layers', () => {
  it('refuses a layer that is not true or false, and an unknown field', async () => {
    expectError(await openBatch({ size: 1, tdmrep: 'yes' }), 400, 'invalid_request');
    expectError(await openBatch({ size: 1, contentCredentials: 1 }), 400, 'invalid_request');
    expectError(await openBatch({ size: 1, c2pa: true }), 400, 'invalid_request');
    // Left out, the signal layers are off.
    const plain = await openBatch({ size: 1, provenance: true });
    expect(plain.status).toBe(201);
    expect(plain.json.layers).toEqual({ provenance: true, fingerprint: false, tdmrep: false, contentCredentials: false });
  });

  it('marks JPEG, PNG and WebP: TDMRep and a new signed manifest stating notAllowed, valid for the reference reader, kept in the records and the receipt', async () => {
    const opened = await openBatch({ size: 3, tdmrep: true, contentCredentials: true });
    expect(opened.status).toBe(201);
    expectConforms(opened, 'post', '/api/v1/dashboard/batches');
    expect(opened.json.layers).toEqual({ provenance: false, fingerprint: false, tdmrep: true, contentCredentials: true });
    const batchId: string = opened.json.id;
    const shas: string[] = [];
    for (const [format, ext, type] of FORMATS) {
      const form = imageForm(images.get(ext)!, `photo.${ext}`, type);
      const a = await post(`/api/v1/dashboard/batches/${batchId}/images`, form.body, form.contentType);
      expect(a.status, a.body.subarray(0, 300).toString()).toBe(200);
      expectConforms(a, 'post', '/api/v1/dashboard/batches/{id}/images');
      expect(a.json.layers).toEqual(['tdmrep', 'content-credentials']);
      expect(a.json.credentials).toBe('none');
      expect(a.json.before.otherSignals).toEqual([]);
      expect(a.json.after.optedOut).toBe(true);
      expect(a.json.after.otherSignals).toEqual(['c2pa.trainingMining', 'tdmrep.reservation']);
      expect(a.json.after.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
      expect(a.json.after.warnings).toEqual([]);
      const bytes = Buffer.from(a.json.imageBase64, 'base64');
      expect(bytes.toString('latin1')).toContain(POLICY);
      const report = await read(format, bytes);
      expect(report.validation_state).toBe('Valid');
      expect((report.validation_status ?? []).map((s) => s.code).filter((s) => s !== 'signingCredential.untrusted')).toEqual([]);
      const active = report.manifests[report.active_manifest]!;
      expect(active.assertions.find((x) => x.label === 'cawg.training-mining')?.data.entries).toEqual({
        'cawg.ai_generative_training': NOT_ALLOWED,
        'cawg.ai_inference': NOT_ALLOWED,
        'cawg.ai_training': NOT_ALLOWED,
        'cawg.data_mining': NOT_ALLOWED,
      });
      // Verify over the API reads the same file the same way, and knows it as marked here.
      const vf = imageForm(bytes, `marked.${ext}`, type);
      const v = await post('/api/v1/verify', vf.body, vf.contentType);
      expect(v.status).toBe(200);
      expect(v.json.otherSignals).toEqual(['c2pa.trainingMining', 'tdmrep.reservation']);
      expect(v.json.c2pa.trainingMining).toBe('notAllowed');
      shas.push(a.json.sha256);
    }
    const batch = await request(server, `/api/v1/dashboard/batches/${batchId}`, { headers: auth() });
    expect(batch.json.layers).toEqual({ provenance: false, fingerprint: false, tdmrep: true, contentCredentials: true });
    expect(batch.json.records.map((r: { sha256: string; layers: string[] }) => [r.sha256, r.layers]).sort()).toEqual(
      shas.map((s) => [s, ['tdmrep', 'content-credentials']]).sort(),
    );
    const receipt = await request(server, `/api/v1/dashboard/batches/${batchId}/receipt`, { headers: auth() });
    expect(receipt.status).toBe(200);
    const text = await pdfText(receipt.body);
    expect(text).toContain('tdmrep, content-credentials');
    for (const sha of shas) expect(text).toContain(sha);
  });
});
