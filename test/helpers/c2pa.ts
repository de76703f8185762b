/**
 * Content Credentials in tests: the reference reader's report of a file, a file given credentials by
 * another signer (a "camera"), and what every update manifest must satisfy (the reader and verify).
 */
import { expect } from 'vitest';
import { coseSign1, reserveSizeFor } from '../../src/c2pa/cose.js';
import type { C2paContainer } from '../../src/c2pa/detect.js';
import { generateIdentity, parseIdentity } from '../../src/c2pa/identity.js';
import { loadC2pa, MIME } from '../../src/c2pa/reader.js';
import { blobOf } from '../../src/c2pa/update.js';
import { noLayers } from '../../src/pipeline/layers.js';
import { verifyReport } from '../../src/pipeline/verify.js';

export interface Report {
  active_manifest: string;
  validation_state: string;
  validation_status?: { code: string }[];
  manifests: Record<
    string,
    {
      assertions: { label: string; data: { entries?: Record<string, { use: string }>; actions?: { action: string }[] } }[];
      ingredients: { relationship: string; active_manifest?: string }[];
      signature_info?: { issuer?: string; common_name?: string };
    }
  >;
}

/** The reference reader's report, optionally trusting `anchor` (PEM). */
export async function read(format: C2paContainer, bytes: Uint8Array, anchor?: string): Promise<Report> {
  const m = await loadC2pa();
  const r = await m.WasmReader.fromBytes(MIME[format], bytes, anchor ? JSON.stringify({ trust: { trust_anchors: anchor } }) : undefined);
  try {
    return JSON.parse(r.json()) as Report;
  } finally {
    r.free();
  }
}

/** `bytes` given Content Credentials by another signer (a "camera"), as the tests' PNG, WebP and JPEG cases, with `assertions` of its own. */
export async function withCredentials(format: C2paContainer, bytes: Uint8Array, assertions: { label: string; data: unknown }[] = []): Promise<Uint8Array> {
  const pem = (await generateIdentity()).identity;
  const camera = parseIdentity(pem, pem, 'camera', true);
  const m = await loadC2pa();
  const b = m.WasmBuilder.fromJson(JSON.stringify({ claim_generator_info: [{ name: 'test camera', version: '1' }], assertions }));
  try {
    b.setIntent({ create: 'http://cv.iptc.org/newscodes/digitalsourcetype/digitalCapture' });
    const size = reserveSizeFor(camera);
    const signer = { alg: camera.alg, reserveSize: size, sign: async (claim: Uint8Array) => new Uint8Array(coseSign1(camera, claim, size)) };
    return await b.sign(signer as Parameters<typeof b.sign>[0], [], MIME[format], blobOf(bytes));
  } finally {
    b.free();
  }
}

/** What every update must satisfy, checked with the reference reader and with verify. */
export async function expectUpdated(format: C2paContainer, input: Uint8Array, output: Uint8Array, edit = 'c2pa.edited.metadata'): Promise<Report> {
  const before = await read(format, input);
  const after = await read(format, output);
  const codes = (after.validation_status ?? []).map((s) => s.code);
  expect(after.validation_state).toBe('Valid');
  expect(codes).not.toContain('assertion.dataHash.mismatch');
  expect(codes.every((c) => c === 'signingCredential.untrusted' || c === 'cawg.x509.credential.untrusted')).toBe(true);
  // A new manifest, active, with the previous active one as its parent.
  expect(Object.keys(after.manifests)).toHaveLength(Object.keys(before.manifests).length + 1);
  expect(after.active_manifest).not.toBe(before.active_manifest);
  const active = after.manifests[after.active_manifest]!;
  expect(active.ingredients).toEqual([expect.objectContaining({ relationship: 'parentOf', active_manifest: before.active_manifest })]);
  const training = active.assertions.find((a) => a.label === 'cawg.training-mining');
  expect(training?.data.entries).toMatchObject({ 'cawg.ai_training': { use: 'notAllowed' }, 'cawg.ai_generative_training': { use: 'notAllowed' } });
  const actions = active.assertions.find((a) => a.label.startsWith('c2pa.actions'))?.data.actions?.map((a) => a.action);
  expect(actions).toEqual(['c2pa.opened', edit]);
  const v = await verifyReport(output, noLayers);
  expect(v.optedOut).toBe(true);
  expect(v.signals).toEqual(['iptc.dataMining']);
  expect(v.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
  expect(v.otherSignals).toContain('c2pa.trainingMining');
  expect(v.warnings).toEqual([]);
  return after;
}
