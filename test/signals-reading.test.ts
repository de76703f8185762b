/**
 * Reading the forms of the opt-out that real files carry (docs/signals.md "What verify reports"): ExifTool's
 * display strings in plus:DataMining, TDMRep in the XMP (element and attribute forms), and training-mining
 * assertions as C2PA 1.x and CAWG write them (legacy `c2pa.` labels and entry names, `constraint_info` and
 * `constraints_info`, `constrained` counted as a reservation). Files are made with the engine and the
 * reference C2PA builder, and read by verify.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { protect } from '../src/marking/engine.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { NS_PLUS, NS_TDMREP } from '../src/xmp/namespaces.js';
import { setSimpleProperty } from '../src/xmp/properties.js';
import { tokenUri } from '../src/xmp/vocab.js';
import { withCredentials } from './helpers/c2pa.js';
import { noiseImages } from './helpers/files.js';

let images: Map<string, Buffer>;
beforeAll(async () => {
  images = await noiseImages(64, 48);
});

/** A PNG whose XMP holds plus:DataMining = `value` exactly as given. */
const withDataMining = (value: string): Uint8Array =>
  protect(images.get('png')!, { edit: (doc) => setSimpleProperty(doc, NS_PLUS, 'plus', 'DataMining', value) }).bytes;

describe('plus:DataMining as ExifTool prints it', () => {
  it.each([
    ['Prohibited for AI/ML training', true],
    ['Prohibited for Generative AI/ML training', true],
    ['prohibited except for search engine indexing', true],
    ['Prohibited', true],
    ['Prohibited, see plus:OtherConstraints', true],
    ['  Prohibited,  see iptcExt:LinkedEncRightsExpr ', true],
    ['Allowed', false],
    ['Unspecified - no prohibition defined', false],
    ['Prohibited-ish', false],
  ])('%j reads as opted out: %s', async (value, optedOut) => {
    const v = await verifyReport(withDataMining(value), noLayers);
    expect(v.optedOut).toBe(optedOut);
    expect(v.signals).toEqual(optedOut ? ['iptc.dataMining'] : []);
  });

  it('protect rewrites a display string as the URI readers compare', () => {
    const input = withDataMining('Prohibited for AI/ML training');
    const out = protect(input);
    expect(out.changed).toBe(true);
    expect(Buffer.from(out.bytes).toString('latin1')).toContain(`<plus:DataMining>${tokenUri('DMI-PROHIBITED-AIMLTRAINING')}</plus:DataMining>`);
  });
});

describe('TDMRep in the XMP', () => {
  it.each([
    ['element, reservation 1', (doc: Parameters<typeof setSimpleProperty>[0]) => setSimpleProperty(doc, NS_TDMREP, 'tdm', 'reservation', '1'), true],
    [
      'attribute form',
      (doc: Parameters<typeof setSimpleProperty>[0]) => {
        const desc = doc.getElementsByTagNameNS('http://www.w3.org/1999/02/22-rdf-syntax-ns#', 'Description')[0]!;
        desc.setAttributeNS(NS_TDMREP, 'tdm:reservation', '1');
      },
      true,
    ],
    ['reservation 0', (doc: Parameters<typeof setSimpleProperty>[0]) => setSimpleProperty(doc, NS_TDMREP, 'tdm', 'reservation', '0'), false],
  ])('%s', async (_, edit, reserved) => {
    const v = await verifyReport(protect(images.get('jpg')!, { edit }).bytes, noLayers);
    expect(v.otherSignals.includes('tdmrep.reservation')).toBe(reserved);
  });
});

describe('training-mining assertions as other tools write them', () => {
  const cases: [string, { label: string; data: unknown }, string | null][] = [
    [
      'a legacy c2pa.training-mining label with c2pa. entries',
      { label: 'c2pa.training-mining', data: { entries: { 'c2pa.ai_training': { use: 'notAllowed' } } } },
      'notAllowed',
    ],
    [
      'constrained with constraint_info (C2PA 1.x)',
      { label: 'c2pa.training-mining', data: { entries: { 'c2pa.data_mining': { use: 'constrained', constraint_info: 'https://example.org/licence' } } } },
      'constrained',
    ],
    [
      'constrained with constraints_info (CAWG)',
      { label: 'cawg.training-mining', data: { entries: { 'cawg.ai_generative_training': { use: 'constrained', constraints_info: 'licence required' } } } },
      'constrained',
    ],
    [
      'notAllowed wins over allowed in the same assertion',
      { label: 'cawg.training-mining', data: { entries: { 'cawg.ai_training': { use: 'allowed' }, 'cawg.data_mining': { use: 'notAllowed' } } } },
      'notAllowed',
    ],
    ['ai_inference alone is not a training entry', { label: 'cawg.training-mining', data: { entries: { 'cawg.ai_inference': { use: 'notAllowed' } } } }, null],
    ['all allowed', { label: 'cawg.training-mining', data: { entries: { 'cawg.ai_training': { use: 'allowed' } } } }, 'allowed'],
  ];
  it.each(cases)('%s', async (_, assertion, use) => {
    const bytes = await withCredentials('jpeg', images.get('jpg')!, [assertion]);
    const v = await verifyReport(bytes, noLayers);
    expect(v.c2pa).toEqual({ present: true, valid: true, trainingMining: use });
    // `constrained` is a reservation like `notAllowed`: the file may not be used without the terms.
    expect(v.otherSignals.includes('c2pa.trainingMining')).toBe(use === 'notAllowed' || use === 'constrained');
    expect(v.optedOut).toBe(false); // the IPTC field alone decides optedOut
  });
});
