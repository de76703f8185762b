/**
 * Property-based hostile input: valid files of each format, mutated (bit flips, byte stores, truncation,
 * length fields set to extremes, inserted and duplicated chunks/segments, cut-outs) 10,000 times per
 * format. Every call must return or throw an OptmarkError with an input error code, each case within
 * a hang-detector bound; output, when produced, must re-parse as a marked file of the same format and
 * be a fixed point of protect.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { OptmarkError } from '../src/errors.js';
import { protect, read } from '../src/marking/engine.js';
import {
  type Format,
  app1Ext,
  app1Xmp,
  itxtXmp,
  jpegLayout,
  jpegWith,
  pngChunk,
  pngChunks,
  pngWith,
  sniff,
  webpChunks,
  webpUnknownChunk,
  webpWith,
  webpXmpChunk,
} from './helpers/containers.js';
import { NS, bareXmp, extendedSegments, packet, rawImage, vocab } from './helpers/fixtures.js';

// npm test runs 1,500 cases per format; test/long/marking-fuzz.test.ts (npm run test:long) runs 10,000.
const RUNS = Number(process.env.FUZZ_RUNS ?? 1_500);
/**
 * Hang detector: the slowest case seen on this machine takes a few ms (reported below). It bounds the
 * CPU time the case used (process.cpuUsage), not wall time, which on a busy machine also counts the
 * wait for a core.
 */
const CASE_BOUND_MS = 2_000;
const INPUT_CODES = new Set(['unsupported_format', 'damaged_image', 'limit_exceeded', 'output_too_large']);

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');
/** Small packets keep a case cheap; they still carry every form the reader looks at. */
const smallPacket = (token: string): Buffer =>
  utf8(
    packet({
      ns: { plus: NS.plus },
      attrs: { 'plus:DataMining': vocab(token) },
      body: '<dc:title><rdf:Alt><rdf:li xml:lang="x-default">t</rdf:li></rdf:Alt></dc:title>',
    }),
  );

interface Base {
  name: string;
  bytes: Buffer;
  /** Offsets of length fields: [offset, width in bytes, little-endian]. */
  lengths: Array<[number, 2 | 4, boolean]>;
  /** Offsets where a chunk or segment starts (insertion points). */
  boundaries: number[];
}

function describeBase(name: string, format: Format, bytes: Buffer): Base {
  if (format === 'jpeg') {
    const { segments, scan } = jpegLayout(bytes);
    return {
      name,
      bytes,
      lengths: segments.flatMap((s) => (s.lengthAt === undefined ? [] : [[s.lengthAt, 2, false] as [number, 2, boolean]])),
      boundaries: [...segments.map((s) => s.start), scan],
    };
  }
  if (format === 'png') {
    const { chunks } = pngChunks(bytes);
    return { name, bytes, lengths: chunks.map((c) => [c.start, 4, false]), boundaries: chunks.map((c) => c.start) };
  }
  const { chunks } = webpChunks(bytes);
  return {
    name,
    bytes,
    lengths: [[4, 4, true], ...chunks.map((c): [number, 4, boolean] => [c.sizeAt, 4, true])],
    boundaries: [...chunks.map((c) => c.start), bytes.length],
  };
}

type Mutation =
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'store'; at: number; value: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'length'; field: number; value: number }
  | { kind: 'insert'; boundary: number; chunk: number; payload: Uint8Array; size: number }
  | { kind: 'duplicate'; at: number; length: number }
  | { kind: 'cut'; at: number; length: number };

const EXTREMES = [0, 1, 2, 3, 7, 8, 0x7f, 0xff, 0x100, 0xfffe, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffe, 0xffffffff];

/** One mutation; positions are fractions of the file so one arbitrary serves every base. */
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({
    kind: fc.constant('store' as const),
    at: fc.nat(),
    value: fc.oneof(fc.constantFrom(0x00, 0xff, 0xd9, 0xda, 0xe1), fc.integer({ min: 0, max: 255 })),
  }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('length' as const), field: fc.nat(), value: fc.oneof(fc.constantFrom(...EXTREMES), fc.nat()) }),
  fc.record({
    kind: fc.constant('insert' as const),
    boundary: fc.nat(),
    chunk: fc.nat(),
    payload: fc.uint8Array({ maxLength: 64 }),
    size: fc.oneof(fc.constantFrom(...EXTREMES), fc.nat({ max: 128 })),
  }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat(), length: fc.nat({ max: 256 }) }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat(), length: fc.nat({ max: 64 }) }),
);

/** Chunks or segments to insert: plausible ones (XMP, extension, unknown) with hostile sizes. */
function insertion(format: Format, m: Extract<Mutation, { kind: 'insert' }>): Buffer {
  const payload = Buffer.from(m.payload);
  const xmp = smallPacket('DMI-ALLOWED');
  if (format === 'jpeg') {
    const options = [
      () => app1Xmp(xmp),
      () => app1Ext('A'.repeat(32), m.size, m.size % 97, payload),
      () => Buffer.concat([Buffer.from([0xff, 0xe0 + (m.size & 15), (m.size >> 8) & 0xff, m.size & 0xff]), payload]),
      () => Buffer.from([0xff, 0xd9]),
      () => Buffer.concat([Buffer.from([0xff, 0xe1]), Buffer.from([0xff, 0xff]), Buffer.from('http://ns.adobe.com/xap/1.0/\0', 'latin1'), payload]),
    ];
    return options[m.chunk % options.length]!();
  }
  if (format === 'png') {
    const options = [
      () => itxtXmp(xmp, m.size % 2 === 1),
      () => pngChunk('zTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\0', 'latin1'), payload])),
      () => pngChunk('IDAT', payload),
      () => pngChunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'), payload])),
      () => {
        const c = pngChunk('tEXt', payload);
        c.writeUInt32BE(m.size >>> 0, 0);
        return c;
      },
    ];
    return options[m.chunk % options.length]!();
  }
  const options = [
    () => webpXmpChunk(xmp),
    () => webpUnknownChunk('XMP ', payload),
    () => webpUnknownChunk('ANMF', payload),
    () => {
      const c = webpUnknownChunk('ZZZZ', payload);
      c.writeUInt32LE(m.size >>> 0, 4);
      return c;
    },
  ];
  return options[m.chunk % options.length]!();
}

function apply(format: Format, base: Base, b: Buffer, m: Mutation): Buffer {
  const pos = (n: number): number => (b.length === 0 ? 0 : n % b.length);
  switch (m.kind) {
    case 'flip': {
      const out = Buffer.from(b);
      if (out.length) out[pos(m.at)] = out[pos(m.at)]! ^ (1 << m.bit);
      return out;
    }
    case 'store': {
      const out = Buffer.from(b);
      if (out.length) out[pos(m.at)] = m.value;
      return out;
    }
    case 'truncate':
      return b.subarray(0, pos(m.at));
    case 'length': {
      const [at, width, le] = base.lengths[m.field % base.lengths.length]!;
      if (at + width > b.length) return b;
      const out = Buffer.from(b);
      if (width === 2) out.writeUInt16BE(m.value & 0xffff, at);
      else if (le) out.writeUInt32LE(m.value >>> 0, at);
      else out.writeUInt32BE(m.value >>> 0, at);
      return out;
    }
    case 'insert': {
      const at = Math.min(base.boundaries[m.boundary % base.boundaries.length]!, b.length);
      return Buffer.concat([b.subarray(0, at), insertion(format, m), b.subarray(at)]);
    }
    case 'duplicate': {
      const at = pos(m.at);
      return Buffer.concat([b.subarray(0, at), b.subarray(at, at + m.length), b.subarray(at)]);
    }
    case 'cut': {
      const at = pos(m.at);
      return Buffer.concat([b.subarray(0, at), b.subarray(at + m.length)]);
    }
  }
}

/** The call's result, or undefined after asserting it threw a typed input error. */
function typed<T>(fn: () => T, tally: Map<string, number>): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof OptmarkError)) throw new Error(`untyped error: ${String(e)}`, { cause: e });
    if (!INPUT_CODES.has(e.code)) throw new Error(`unexpected code ${e.code}`);
    tally.set(e.code, (tally.get(e.code) ?? 0) + 1);
    return undefined;
  }
}

const bases = new Map<Format, Base[]>();

beforeAll(async () => {
  const img = rawImage(8, 8, 3, 7);
  const jpg = await img.clone().jpeg({ quality: 50 }).toBuffer();
  // Extended XMP in two portions, the second before the main packet (readers must reorder).
  const ext = extendedSegments(
    bareXmp(`<dc:description>${'e'.repeat(300)}</dc:description>`),
    { ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } },
    200,
  );
  const png = await img.clone().png().toBuffer();
  const lossy = await img.clone().webp({ quality: 50 }).toBuffer();
  const lossless = await rawImage(8, 8, 4, 8).webp({ lossless: true }).toBuffer();
  const add = (format: Format, name: string, bytes: Buffer): void => {
    if (sniff(bytes) !== format) throw new Error(`${name} is not ${format}`);
    bases.set(format, [...(bases.get(format) ?? []), describeBase(name, format, bytes)]);
  };
  add('jpeg', 'plain', jpg);
  add('jpeg', 'xmp', jpegWith(jpg, [app1Xmp(smallPacket('DMI-PROHIBITED'))], 0));
  add('jpeg', 'extended', jpegWith(jpg, [ext.portions[1]!, ext.main, ext.portions[0]!], 0));
  add('png', 'plain', png);
  add('png', 'itxt', pngWith(png, [itxtXmp(smallPacket('DMI-PROHIBITED'))], 'beforeIdat'));
  add('png', 'after-idat-compressed', pngWith(png, [itxtXmp(smallPacket('DMI-ALLOWED'), true)], 'afterIdat'));
  add('webp', 'simple-lossy', lossy);
  add('webp', 'lossless-alpha-xmp', webpWith(lossless, [webpXmpChunk(smallPacket('DMI-PROHIBITED'))]));
});
describe.each(['jpeg', 'png', 'webp'] as const)('%s', (format) => {
  it(`${RUNS} mutated files: a result or a typed error, each within ${CASE_BOUND_MS} ms; outputs re-parse and are fixed points`, () => {
    const tally = new Map<string, number>();
    let produced = 0;
    let slowest = 0;
    let cases = 0;
    const list = bases.get(format)!;
    fc.assert(
      fc.property(fc.nat(), fc.array(mutation, { minLength: 1, maxLength: 3 }), (which, mutations) => {
        const base = list[which % list.length]!;
        const input = mutations.reduce((b, m) => apply(format, base, b, m), base.bytes);
        const t0 = process.cpuUsage();
        typed(() => read(input), tally);
        const result = typed(() => protect(input), tally);
        if (result) {
          produced++;
          const out = result.bytes;
          expect(sniff(out)).toBe(format);
          expect(read(out)).toMatchObject({ format, optedOut: true, token: 'DMI-PROHIBITED-AIMLTRAINING' });
          expect(Buffer.from(protect(out).bytes).equals(Buffer.from(out))).toBe(true);
        }
        const used = process.cpuUsage(t0);
        const ms = (used.user + used.system) / 1000;
        slowest = Math.max(slowest, ms);
        cases++;
        expect(ms).toBeLessThan(CASE_BOUND_MS);
      }),
      { numRuns: RUNS, seed: 20_240_601 + format.length },
    );
    console.log(
      `fuzz ${format}: ${cases} cases, ${produced} protected, errors ${JSON.stringify(Object.fromEntries(tally))}, slowest case ${slowest.toFixed(1)} ms`,
    );
    expect(cases).toBeGreaterThanOrEqual(RUNS);
    // Both outcomes must be common, or the mutations are not exercising the parsers.
    expect(produced).toBeGreaterThan(RUNS / 10);
    expect([...tally.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(RUNS / 10);
  });
});
