/**
 * The hostile-file generators of issue #20 run longer than in `npm test` (HOSTILE_FUZZ_RUNS, default
 * 300, random seed unless FUZZ_SEED), plus PNG chunk floods at the chunk limit, which take a 12 MB file
 * each. The property lives in test/helpers/hostile.ts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { pngChunk, pngWith } from '../helpers/containers.js';
import { FixtureSet } from '../helpers/fixtures.js';
import { bombCaseArb, bombFile, checkHostile, expectedRead, floodCaseArb, floodFile } from '../helpers/hostile.js';

const RUNS = Number(process.env.HOSTILE_FUZZ_RUNS ?? 300);
const seed = process.env.FUZZ_SEED === undefined ? {} : { seed: Number(process.env.FUZZ_SEED) };
const fx = new FixtureSet();
afterAll(() => fx.close());
let png: Buffer;
let jpg: Buffer;
beforeAll(async () => {
  png = await fx.bytes('base.png');
  jpg = await fx.bytes('base.jpg');
});

describe('hostile-file generators (long run)', () => {
  it('compressed-chunk bombs and size amplification', () => {
    fc.assert(
      fc.property(bombCaseArb, (c) => {
        const input = bombFile(png, c);
        checkHostile(input, c.limitOffset === undefined ? undefined : input.length + c.limitOffset, expectedRead(c));
      }),
      { numRuns: RUNS, ...seed },
    );
  });

  it('JPEG segment floods', () => {
    fc.assert(
      fc.property(floodCaseArb, (c) => {
        checkHostile(floodFile(jpg, c), undefined);
      }),
      { numRuns: Math.ceil(RUNS / 10), ...seed },
    );
  });

  it('PNG chunk floods at the chunk limit', () => {
    const tEXt = pngChunk('tEXt', Buffer.from('k\0v', 'latin1'));
    fc.assert(
      fc.property(fc.integer({ min: 999_990, max: 1_000_001 }), (n) => {
        checkHostile(pngWith(png, [Buffer.concat(Array<Buffer>(n).fill(tEXt))], 'beforeIdat', false), undefined);
      }),
      { numRuns: 3, ...seed },
    );
  });
});
