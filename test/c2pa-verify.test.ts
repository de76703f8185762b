/**
 * verify's additive declarations (issue #21): Content Credentials read with the reference reader
 * (c2pa-wasm) on the two corpus files, TDMRep XMP built into JPEG/PNG/WebP, the cheap manifest-store
 * detector on built containers, and the contract rule that `optedOut`/`signals` stay the IPTC field only.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hasManifestStore, MAX_C2PA_WALK } from '../src/c2pa/detect.js';
import { strictestTrainingUse } from '../src/c2pa/reader.js';
import { requireFormat } from '../src/formats/index.js';
import { protect } from '../src/marking/engine.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { jpegSegment, jpegWith, pngChunk, pngWith } from './helpers/containers.js';
import { type Format, smallImage } from './helpers/images.js';

const CORPUS = join(__dirname, '..', '..', 'shared', 'corpus');
const corpusFile = (name: string): Buffer => readFileSync(join(CORPUS, name));
const haveCorpus = existsSync(join(CORPUS, 'c2pa_CA.jpg'));

const tdmPacket = (reservation: string, policy?: string): Uint8Array =>
  Buffer.from(
    `<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
      `<rdf:Description rdf:about="" xmlns:tdm="http://www.w3.org/ns/tdmrep/" tdm:reservation="${reservation}"${policy ? ` tdm:policy="${policy}"` : ''}/>` +
      `</rdf:RDF></x:xmpmeta><?xpacket end="w"?>`,
  );

async function withXmp(format: Format, packet: Uint8Array): Promise<Uint8Array> {
  const img = await smallImage(format);
  return Buffer.concat(requireFormat(img).writeXmp(img, { main: packet }));
}

/** A JUMBF superbox as C2PA puts it in JPEG APP11: CI, En, Z, then jumb(jumd(type, toggles, label)). */
function app11Jumbf(type: string): Buffer {
  const label = Buffer.from('c2pa\0');
  const jumd = Buffer.concat([Buffer.alloc(4), Buffer.from('jumd'), Buffer.from(type.padEnd(16, '\0')), Buffer.from([3]), label]);
  jumd.writeUInt32BE(jumd.length, 0);
  const jumb = Buffer.concat([Buffer.alloc(4), Buffer.from('jumb'), jumd]);
  jumb.writeUInt32BE(jumb.length, 0);
  return jpegSegment(0xeb, Buffer.concat([Buffer.from('JP'), Buffer.from([0, 1, 0, 0, 0, 1]), jumb]));
}

function webpWithChunk(img: Uint8Array, type: string, data: Uint8Array): Buffer {
  const chunk = Buffer.concat([Buffer.from(type), Buffer.alloc(4), data, data.length & 1 ? Buffer.alloc(1) : Buffer.alloc(0)]);
  chunk.writeUInt32LE(data.length, 4);
  const out = Buffer.concat([Buffer.from(img), chunk]);
  out.writeUInt32LE(out.length - 8, 4);
  return out;
}

describe('verify: Content Credentials on the corpus files (reference reader)', () => {
  it.runIf(haveCorpus)(
    'CAWG file: present, valid, trainingMining notAllowed, c2pa.trainingMining in otherSignals, optedOut false',
    async () => {
      const r = await verifyReport(corpusFile('c2pa_C_with_CAWG_data.jpg'), noLayers);
      expect(r.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
      expect(r.otherSignals).toEqual(['c2pa.trainingMining']);
      expect(r.optedOut).toBe(false);
      expect(r.signals).toEqual([]);
      expect(r.warnings).toEqual([]);
    },
    60_000,
  );

  it.runIf(haveCorpus)(
    'CA file: present, valid, trainingMining null, no other signal',
    async () => {
      const r = await verifyReport(corpusFile('c2pa_CA.jpg'), noLayers);
      expect(r.c2pa).toEqual({ present: true, valid: true, trainingMining: null });
      expect(r.otherSignals).toEqual([]);
      expect(r.optedOut).toBe(false);
    },
    60_000,
  );

  it.runIf(haveCorpus)(
    'protecting the CAWG file makes optedOut true (IPTC rule) while the C2PA reading is reported on its own',
    async () => {
      const marked = protect(corpusFile('c2pa_C_with_CAWG_data.jpg')).bytes;
      const r = await verifyReport(marked, noLayers);
      expect(r.optedOut).toBe(true);
      expect(r.signals).toEqual(['iptc.dataMining']);
      expect(r.c2pa.present).toBe(true);
      // Writing XMP into the file breaks the data hash: the reader says so, and verify passes it on.
      expect(r.c2pa.valid).toBe(false);
      expect(r.warnings.map((w) => w.code)).toContain('content_credentials_invalid');
    },
    60_000,
  );
});

describe('verify: TDMRep in XMP', () => {
  for (const format of ['jpeg', 'png', 'webp'] as const) {
    it(`${format}: tdm:reservation=1 is reported in otherSignals, optedOut stays false`, async () => {
      const r = await verifyReport(await withXmp(format, tdmPacket('1', 'https://example.com/policy.json')), noLayers);
      expect(r.otherSignals).toEqual(['tdmrep.reservation']);
      expect(r.optedOut).toBe(false);
      expect(r.signals).toEqual([]);
      expect(r.c2pa).toEqual({ present: false, valid: false, trainingMining: null });
    });
    it(`${format}: tdm:reservation=0 is no reservation`, async () => {
      const r = await verifyReport(await withXmp(format, tdmPacket('0')), noLayers);
      expect(r.otherSignals).toEqual([]);
    });
  }

  it('TDMRep and the IPTC field together: optedOut from IPTC only, TDMRep beside it', async () => {
    const marked = protect(await withXmp('png', tdmPacket('1'))).bytes;
    const r = await verifyReport(marked, noLayers);
    expect(r.optedOut).toBe(true);
    expect(r.signals).toEqual(['iptc.dataMining']);
    expect(r.otherSignals).toEqual(['tdmrep.reservation']);
  });
});

describe('manifest-store detection (no wasm for files without one)', () => {
  it('a plain file of each format has no store', async () => {
    for (const f of ['jpeg', 'png', 'webp'] as const) expect(hasManifestStore(f, await smallImage(f))).toBe(false);
  });

  it('JPEG: APP11 JUMBF of the C2PA type counts, other JUMBF does not', async () => {
    const img = await smallImage('jpeg');
    expect(hasManifestStore('jpeg', jpegWith(img, [app11Jumbf('c2pa')]))).toBe(true);
    expect(hasManifestStore('jpeg', jpegWith(img, [app11Jumbf('xyzw')]))).toBe(false);
  });

  it('PNG caBX and WebP C2PA chunks count; a damaged store is present, not valid, with a warning', async () => {
    // Well framed (every length fits), but not a manifest store the reader can read.
    const store = framedGarbage();
    const png = pngWith(await smallImage('png'), [pngChunk('caBX', store)], 'beforeIdat');
    expect(hasManifestStore('png', png)).toBe(true);
    const webp = webpWithChunk(await smallImage('webp'), 'C2PA', store);
    expect(hasManifestStore('webp', webp)).toBe(true);
    for (const bytes of [png, webp]) {
      const r = await verifyReport(bytes, noLayers);
      expect(r.c2pa).toEqual({ present: true, valid: false, trainingMining: null });
      expect(r.warnings.map((w) => w.code)).toContain('content_credentials_unreadable');
      expect(r.optedOut).toBe(false);
    }
  }, 60_000);

  it('a store whose lengths its bytes do not hold is reported unread: content_credentials_malformed, the opt-out still read (issue #37)', async () => {
    // "not jumbf" read as a JUMBF box declares 1,852,797,984 bytes in a 9-byte chunk.
    const png = pngWith(await smallImage('png'), [pngChunk('caBX', Buffer.from('not jumbf'))], 'beforeIdat');
    const webp = webpWithChunk(await smallImage('webp'), 'C2PA', Buffer.from('not jumbf'));
    for (const bytes of [png, webp]) {
      const r = await verifyReport(bytes, noLayers);
      expect(r.c2pa).toEqual({ present: true, valid: false, trainingMining: null });
      const w = r.warnings.find((x) => x.code === 'content_credentials_malformed');
      expect(w?.message).toContain('declares 1852797984 bytes, and 9 are left');
      expect(r.optedOut).toBe(false);
    }
  });

  it('walks at most MAX_C2PA_WALK chunks (typed error past it)', async () => {
    const empty = pngChunk('tEXt', Buffer.alloc(0));
    const many = pngWith(await smallImage('png'), Array(MAX_C2PA_WALK + 2).fill(empty), 'afterIhdr');
    expect(() => hasManifestStore('png', many)).toThrow(expect.objectContaining({ code: 'limit_exceeded' }));
  });
});

describe('strictest training use', () => {
  const store = (label: string, entries: Record<string, { use: string }>) => ({
    active_manifest: 'm',
    manifests: { m: { assertions: [{ label, data: { entries } }] } },
  });
  it('orders notAllowed > constrained > allowed over training entries only (inference is not training)', () => {
    expect(strictestTrainingUse(store('c2pa.training-mining', { 'c2pa.ai_training': { use: 'allowed' }, 'c2pa.data_mining': { use: 'constrained' } }))).toBe(
      'constrained',
    );
    expect(strictestTrainingUse(store('cawg.training-mining', { 'cawg.ai_inference': { use: 'notAllowed' }, 'cawg.ai_training': { use: 'allowed' } }))).toBe(
      'allowed',
    );
    expect(strictestTrainingUse(store('cawg.training-mining', { 'cawg.ai_generative_training': { use: 'notAllowed' } }))).toBe('notAllowed');
    expect(strictestTrainingUse(store('c2pa.actions', { 'c2pa.ai_training': { use: 'notAllowed' } }))).toBe(null);
  });
});

/** A JUMBF superbox with a C2PA description and one CBOR integer: every length fits, nothing a reader can use. */
function framedGarbage(): Buffer {
  const box = (type: string, body: Buffer): Buffer => {
    const h = Buffer.alloc(8);
    h.writeUInt32BE(body.length + 8, 0);
    h.write(type, 4, 'latin1');
    return Buffer.concat([h, body]);
  };
  const jumd = box('jumd', Buffer.concat([Buffer.from('6332706100110010800000aa00389b71', 'hex'), Buffer.from([0x03]), Buffer.from('c2pa\0')]));
  return box('jumb', Buffer.concat([jumd, box('cbor', Buffer.from([0x01]))]));
}
