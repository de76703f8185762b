/**
 * The signal layers on the layer path (src/signals/layers.ts through src/pipeline/mark.ts): TDMRep in
 * the XMP and a new C2PA manifest for a file without one, alone and composed with the provenance tag and
 * the fingerprint, on JPEG, PNG and WebP. Each output is read by ExifTool (DataMining, the TDMRep
 * fields), by the reference C2PA reader (c2pa-rs as wasm) and by verify with the live layers (the tag
 * and the fingerprint still found).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ExifTool } from 'exiftool-vendored';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { credentialsPolicy } from '../src/pipeline/credentials.js';
import { LiveLayers } from '../src/pipeline/layers-live.js';
import { runMark } from '../src/pipeline/mark.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { protect } from '../src/marking/engine.js';
import { type SignalLayers, setTdmRep } from '../src/signals/layers.js';
import { NOT_ALLOWED, parseTrainingMining } from '../src/signals/training.js';
import { expectUpdated, read, withCredentials } from './helpers/c2pa.js';
import { noiseImages, runBinary, TempDirs } from './helpers/files.js';
import { exiftoolTags } from './helpers/oracle.js';

const temp = new TempDirs('optmark-signals-');
const exiftool = new ExifTool({ taskTimeoutMillis: 60_000 });
const POLICY = 'https://example.org/tdm-policy';
const FORMATS = [
  ['jpeg', 'jpg'],
  ['png', 'png'],
  ['webp', 'webp'],
] as const;
const BOTH: SignalLayers = { tdmrep: true, tdmPolicy: POLICY, contentCredentials: true, training: NOT_ALLOWED };
const CAWG_ALL = {
  'cawg.ai_generative_training': { use: 'notAllowed' },
  'cawg.ai_inference': { use: 'notAllowed' },
  'cawg.ai_training': { use: 'notAllowed' },
  'cawg.data_mining': { use: 'notAllowed' },
};

let images: Map<string, Buffer>;
let dataDir: string;
let live: LiveLayers;
let policy: ReturnType<typeof credentialsPolicy>;

beforeAll(async () => {
  images = await noiseImages(320, 240);
  dataDir = temp.make();
  live = new LiveLayers({ dataDir, maxPixels: 1e8, signingKeyFile: undefined, fingerprintSecretFile: undefined, fingerprintDetect: true });
  policy = credentialsPolicy('update', { dataDir });
});

afterAll(async () => {
  await exiftool.end();
  temp.removeAll();
});

/** ExifTool's reading of the three fields a TDMRep-and-IPTC reader looks at. */
async function exifSignals(bytes: Uint8Array, ext: string): Promise<Record<string, unknown>> {
  const path = join(temp.make(), `x.${ext}`);
  writeFileSync(path, bytes);
  const tags = await exiftoolTags(exiftool, path, ['-XMP-plus:DataMining', '-XMP-tdm:all']);
  return { dataMining: tags['XMP-plus:DataMining'], reservation: tags['XMP-tdm:Reservation'], policy: tags['XMP-tdm:Policy'] };
}

describe('the TDMRep and Content Credentials layers', () => {
  const combos = [
    { provenance: false, fingerprint: false },
    { provenance: true, fingerprint: false },
    { provenance: false, fingerprint: true },
    { provenance: true, fingerprint: true },
  ];
  for (const [format, ext] of FORMATS) {
    for (const c of combos) {
      const name = [c.fingerprint && 'fingerprint', 'tdmrep', c.provenance && 'provenance', 'content credentials'].filter(Boolean).join(' + ');
      it(`${format}: ${name}: every signal reads back and every layer still validates`, async () => {
        const input = images.get(ext)!;
        const out = await runMark(input, { ...c, signals: BOTH }, live, policy);
        expect(out.layers).toEqual([c.fingerprint && 'fingerprint', 'tdmrep', c.provenance && 'provenance', 'content-credentials'].filter(Boolean));
        expect(out.credentials).toBe('none');
        expect(await exifSignals(out.bytes, ext)).toEqual({ dataMining: 'DMI-PROHIBITED-AIMLTRAINING', reservation: 1, policy: POLICY });
        const report = await read(format, out.bytes);
        expect(report.validation_state).toBe('Valid');
        expect((report.validation_status ?? []).map((s) => s.code).filter((s) => s !== 'signingCredential.untrusted')).toEqual([]);
        expect(Object.keys(report.manifests)).toHaveLength(1);
        const active = report.manifests[report.active_manifest]!;
        expect(active.assertions.find((a) => a.label === 'cawg.training-mining')?.data.entries).toEqual(CAWG_ALL);
        const actions = active.assertions.find((a) => a.label.startsWith('c2pa.actions'))?.data.actions?.map((a) => a.action);
        expect(actions).toEqual(['c2pa.opened', c.fingerprint ? 'c2pa.edited' : 'c2pa.edited.metadata']);
        expect(active.ingredients).toEqual([expect.objectContaining({ relationship: 'parentOf' })]);
        const v = await verifyReport(out.bytes, live);
        expect(v.optedOut).toBe(true);
        expect(v.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
        expect(v.otherSignals).toEqual(['c2pa.trainingMining', 'tdmrep.reservation']);
        expect(v.warnings).toEqual([]);
        expect(v.provenance).toEqual(c.provenance ? { present: true, valid: true, verifiable: true } : { present: false, valid: false, verifiable: false });
        expect(v.fingerprint.present).toBe(c.fingerprint);
      });
    }
  }

  it.each(FORMATS)('%s: TDMRep alone writes the XMP losslessly, adds no manifest, and a second run changes nothing', async (format, ext) => {
    // A file whose XMP holds other properties (and no tdm:policy): they all stay.
    const base = protect(images.get(ext)!, { edit: (doc) => setTdmRep(doc, undefined) }).bytes;
    const withOther = protect(base, {
      edit: (doc) => {
        const desc = doc.getElementsByTagNameNS('http://www.w3.org/1999/02/22-rdf-syntax-ns#', 'Description')[0]!;
        desc.setAttributeNS('http://purl.org/dc/elements/1.1/', 'dc:format', 'kept/here');
      },
    }).bytes;
    const layers: SignalLayers = { tdmrep: true, tdmPolicy: POLICY, contentCredentials: false, training: NOT_ALLOWED };
    const once = await runMark(withOther, { provenance: false, fingerprint: false, signals: layers }, live);
    expect(hasManifestStore(format, once.bytes)).toBe(false);
    const path = join(temp.make(), `x.${ext}`);
    writeFileSync(path, once.bytes);
    const tags = await exiftoolTags(exiftool, path, ['-XMP-dc:Format', '-XMP-tdm:all']);
    expect(tags).toMatchObject({ 'XMP-dc:Format': 'kept/here', 'XMP-tdm:Reservation': 1, 'XMP-tdm:Policy': POLICY });
    const twice = await runMark(once.bytes, { provenance: false, fingerprint: false, signals: layers }, live);
    expect(Buffer.from(twice.bytes).equals(Buffer.from(once.bytes))).toBe(true);
    // Without a policy setting, a policy the file already names stays.
    const kept = await runMark(once.bytes, { provenance: false, fingerprint: false, signals: { ...layers, tdmPolicy: undefined } }, live);
    expect((await exifSignals(kept.bytes, ext)).policy).toBe(POLICY);
  });

  it.each(FORMATS)('%s: a file that already has Content Credentials gets the update manifest, with TDMRep', async (format, ext) => {
    const fresh = await withCredentials(format, images.get(ext)!);
    const out = await runMark(fresh, { provenance: false, fingerprint: false, signals: BOTH }, live, policy);
    expect(out.credentials).toBe('updated');
    expect(out.layers).toEqual(['tdmrep']);
    await expectUpdated(format, fresh, out.bytes);
    expect((await exifSignals(out.bytes, ext)).reservation).toBe(1);
  });

  it('states the configured uses (OPTMARK_C2PA_TRAINING_MINING), the others notAllowed', async () => {
    const training = parseTrainingMining('ai_inference=allowed, cawg.data_mining=constrained');
    const out = await runMark(images.get('png')!, { provenance: false, fingerprint: false, signals: { ...BOTH, training } }, live, policy);
    const report = await read('png', out.bytes);
    expect(report.manifests[report.active_manifest]!.assertions.find((a) => a.label === 'cawg.training-mining')?.data.entries).toEqual({
      ...CAWG_ALL,
      'cawg.ai_inference': { use: 'allowed' },
      'cawg.data_mining': { use: 'constrained' },
    });
    expect((await verifyReport(out.bytes, live)).c2pa.trainingMining).toBe('notAllowed');
    for (const bad of ['ai_everything=allowed', 'ai_training=maybe', 'ai_training']) expect(() => parseTrainingMining(bad)).toThrow();
  });

  it('optmark mark --tdmrep --content-credentials: the flags, the settings and their usage errors', async () => {
    const src = temp.folder({ 'a.jpg': images.get('jpg')!, 'b.webp': images.get('webp')! });
    const out = join(temp.make(), 'out');
    const env = { OPTMARK_DATA_DIR: dataDir, OPTMARK_TDM_POLICY: POLICY };
    const r = await runBinary(['mark', src, '--out', out, '--tdmrep', '--content-credentials'], { env });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`done 2, skipped 0, failed 0 (opt-out field, TDMRep (policy ${POLICY}), Content Credentials)`);
    for (const [f, format] of [
      ['a.jpg', 'jpeg'],
      ['b.webp', 'webp'],
    ] as const) {
      const bytes = readFileSync(join(out, f));
      expect((await read(format, bytes)).validation_state).toBe('Valid');
      expect((await exifSignals(bytes, f.split('.')[1]!)).policy).toBe(POLICY);
    }
    const usage = await runBinary(['mark', src, '--out', out, '--tdm-policy', POLICY], { env });
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain('--tdm-policy applies to --tdmrep');
    const badUrl = await runBinary(['mark', src, '--out', out, '--tdmrep', '--tdm-policy', 'not a url'], { env });
    expect(badUrl.status).toBe(2);
    const badSetting = await runBinary(['mark', src, '--out', out, '--content-credentials'], {
      env: { ...env, OPTMARK_C2PA_TRAINING_MINING: 'ai_training=maybe' },
    });
    expect(badSetting.status).not.toBe(0);
    expect(badSetting.stderr).toContain('OPTMARK_C2PA_TRAINING_MINING');
  });
});
