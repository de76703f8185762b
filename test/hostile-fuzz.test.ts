/**
 * The hostile-file generators of issue #20 (compressed-chunk bombs, segment floods, size amplification),
 * run for a bounded number of cases in `npm test`; test/long/hostile-fuzz.test.ts runs them longer.
 * The property lives in test/helpers/hostile.ts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixtureSet } from './helpers/fixtures.js';
import { bombCaseArb, bombFile, checkHostile, chunkFloodCaseArb, chunkFloodFile, expectedRead, floodCaseArb, floodFile } from './helpers/hostile.js';

/** Each case inflates up to 16 MiB and parses it; a few dozen keep the file near ten seconds here. */
const RUNS = Number(process.env.HOSTILE_FUZZ_RUNS ?? 24);
const fx = new FixtureSet();
afterAll(() => fx.close());
let png: Buffer;
let jpg: Buffer;
let webp: Buffer;
beforeAll(async () => {
  png = await fx.bytes('base.png');
  jpg = await fx.bytes('base.jpg');
  webp = await fx.bytes('lossless.webp');
});

describe('hostile-file generators (bounded run)', () => {
  it('compressed-chunk bombs and size amplification: refused exactly past the budget; any answer is within bounds and reads back', () => {
    const tally = new Map<string, number>();
    fc.assert(
      fc.property(bombCaseArb, (c) => {
        const input = bombFile(png, c);
        const limit = c.limitOffset === undefined ? undefined : input.length + c.limitOffset;
        const got = checkHostile(input, limit, expectedRead(c));
        tally.set(got, (tally.get(got) ?? 0) + 1);
      }),
      { numRuns: RUNS, seed: Number(process.env.FUZZ_SEED ?? 20) },
    );
    expect([...tally.values()].reduce((a, b) => a + b, 0)).toBe(RUNS);
    // With the fixed seed the run reaches every outcome: refused input, refused output, an answer.
    if (RUNS >= 24 && process.env.FUZZ_SEED === undefined)
      for (const k of ['ok', 'limit_exceeded', 'output_too_large']) expect(tally.get(k), k).toBeGreaterThan(0);
  });

  it('segment floods around the JPEG segment limit: protect never returns a file its reader refuses', () => {
    fc.assert(
      fc.property(floodCaseArb, (c) => {
        checkHostile(floodFile(jpg, c), undefined);
      }),
      { numRuns: Math.max(6, Math.ceil(RUNS / 4)), seed: Number(process.env.FUZZ_SEED ?? 20) },
    );
  });

  it('chunk floods around the container limit (PNG, simple and extended WebP): protect never returns a file verify or protect refuse', () => {
    fc.assert(
      fc.property(chunkFloodCaseArb, (c) => {
        checkHostile(chunkFloodFile(png, webp, c), undefined);
      }),
      { numRuns: Math.max(6, Math.ceil(RUNS / 4)), seed: Number(process.env.FUZZ_SEED ?? 20) },
    );
  });
});
