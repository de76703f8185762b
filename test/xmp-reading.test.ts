/**
 * readPayload: the opt-out and TDMRep reading of a file's packets, known without a parse for optmark's
 * own fresh packet. Every answer must be the one a fresh parse gives (openPayload, then readView), whatever was read before: well-formed or not,
 * DTDs and entities, UTF-16, duplicates, Extended XMP, packets one byte apart.
 */
import { describe, expect, it } from 'vitest';
import type { XmpPayload } from '../src/formats/types.js';
import { DATA_MINING_TOKENS, type DataMiningToken, freshPacket, openPayload, readPayload, readView, type XmpReading } from '../src/xmp/index.js';
import { NS, packet, VARIANTS, vocab } from './helpers/fixtures.js';

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');
const payload = (packets: Uint8Array[], extended: Array<[string, Uint8Array]> = []): XmpPayload => ({
  packets,
  extended: new Map(extended),
  canonical: false,
  keptOnRewrite: 0,
});
/** What a fresh parse says (the reading before any cache existed). */
const parsed = (p: XmpPayload): XmpReading => {
  const view = openPayload(p);
  return readView(view);
};
const TOKENS = Object.keys(DATA_MINING_TOKENS) as DataMiningToken[];

/** Crafted payloads besides the fixture variants: the cases a shortcut could get wrong. */
const CRAFTED: Array<[string, XmpPayload]> = [
  ['not well-formed', payload([utf8('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><unclosed>')])],
  [
    'not well-formed, DataMining inside',
    payload([utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') } }).replace('</rdf:RDF>', ''))]),
  ],
  [
    'entity that would spell the value',
    payload([
      utf8(
        packet({
          prolog: `<!DOCTYPE x:xmpmeta [<!ENTITY dm "${vocab('DMI-PROHIBITED')}">]>\n`,
          bare: true,
          ns: { plus: NS.plus },
          body: '<plus:DataMining>&dm;</plus:DataMining>',
        }),
      ),
    ]),
  ],
  [
    'character reference in the value',
    payload([utf8(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining>${vocab('DMI-PROHIBITED').replace('P', '&#80;')}</plus:DataMining>` }))]),
  ],
  [
    'TDMRep reservation and policy',
    payload([utf8(packet({ ns: { tdm: 'http://www.w3.org/ns/tdmrep/' }, attrs: { 'tdm:reservation': '1', 'tdm:policy': 'https://example.com/p' } }))]),
  ],
  [
    'the fresh packet plus a second, allowing one',
    payload([freshPacket('DMI-PROHIBITED'), utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } }))]),
  ],
  ['the fresh packet with a stray NUL', payload([Buffer.concat([freshPacket('DMI-PROHIBITED'), Buffer.alloc(1)])])],
  ['the fresh packet as Extended XMP only', payload([], [['0'.repeat(32), freshPacket('DMI-PROHIBITED')]])],
  ['no packet', payload([])],
];

describe('readPayload', () => {
  const cases: Array<[string, XmpPayload]> = [
    ...VARIANTS.filter((v) => v.key !== 'huge').map((v): [string, XmpPayload] => [v.key, payload(v.packets())]),
    ...CRAFTED,
  ];

  it('says what a fresh parse says, for every fixture variant and crafted packet, first time and again, in any order', () => {
    const want = cases.map(([, p]) => parsed(p));
    for (let round = 0; round < 3; round++) {
      const order = round === 1 ? [...cases.keys()].reverse() : [...cases.keys()];
      for (const i of order) expect(readPayload(cases[i]![1]), `${cases[i]![0]} (round ${round})`).toEqual(want[i]);
    }
  });

  it("knows optmark's fresh packet for every token, exactly as a parse reads it", () => {
    for (const token of TOKENS) {
      const p = payload([freshPacket(token)]);
      const r = readPayload(p);
      expect(r).toEqual(parsed(p));
      expect(r.optOut.values).toEqual([vocab(token)]);
    }
  });

  it('packets one byte apart, or the same bytes split differently, get their own answers', () => {
    const prohibit = utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') } }));
    const allow = utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } }));
    expect(readPayload(payload([prohibit])).optOut.optedOut).toBe(true);
    expect(readPayload(payload([allow])).optOut.optedOut).toBe(false);
    // The fresh packet cut in two: neither half is well-formed, and the key must not join them into the whole.
    const fresh = freshPacket('DMI-PROHIBITED');
    const at = Buffer.from(fresh).indexOf('DMI-PROHIBITED') + 3;
    const split = payload([fresh.subarray(0, at), fresh.subarray(at)]);
    expect(readPayload(split)).toEqual(parsed(split));
    expect(readPayload(split).optOut.optedOut).toBe(false);
    expect(readPayload(payload([fresh])).optOut.optedOut).toBe(true);
  });

  it('a caller changing the answer it got does not change the next one', () => {
    const seeded = readPayload(payload([freshPacket('DMI-PROHIBITED')]));
    seeded.optOut.values.length = 0;
    seeded.tdmrep.reserved = true;
    expect(readPayload(payload([freshPacket('DMI-PROHIBITED')]))).toEqual(parsed(payload([freshPacket('DMI-PROHIBITED')])));
  });

  it('a payload over the markup limit throws every time, as openPayload does', () => {
    const many = utf8(`<x:xmpmeta xmlns:x="adobe:ns:meta/">${'<a/>'.repeat(300_001)}</x:xmpmeta>`);
    for (let i = 0; i < 2; i++) expect(() => readPayload(payload([many]))).toThrow(/markup/);
  });
});
