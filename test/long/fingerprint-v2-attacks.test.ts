/**
 * Fingerprint version 2, the long part (npm run test:long): every geometric attack of the issue on a
 * synthetic photo, the lattice's readings, and the chains on a Kodak photograph when ../shared/natural is
 * present. The quick part is test/fingerprint-v2.test.ts; the full attack list with 2,000+ unmarked
 * trials is the bench, bench/fingerprint-robustness.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ATTACKS, type AttackFn, aspect, brightness, chain, crop, jpeg, rotateCrop } from '../../bench/lib/fingerprint-attacks.js';
import { type FingerprintDetail, detectFingerprint, embedFingerprint } from '../../src/fingerprint/index.js';
import { expectFoundAfter, psnr, texturedImage } from '../helpers/fingerprint.js';

const MAX_PIXELS = 40_000_000;
const SECRET = new Uint8Array(32).fill(3);
const NATURAL = fileURLToPath(new URL('../../../shared/natural', import.meta.url));
const rng = (): number => 0.5;

const attack = (name: string): AttackFn => ATTACKS.find((a) => a.name === name)!.fn;

describe('fingerprint v2 geometry on a synthetic photo', async () => {
  const orig = await texturedImage(768, 512, 21);
  const marked = Buffer.from(await embedFingerprint(orig, SECRET, { maxPixels: MAX_PIXELS }));

  const geometric: [string, AttackFn][] = [
    ['rot90', attack('rot90')],
    ['hflip', attack('hflip')],
    ['aspect0.75', attack('aspect0.75')],
    ['border10%', attack('border10%')],
    ['rotate10 bg', attack('rotate10 bg')],
    ['crop25 at the top-left corner', crop(0.25, { x: 0, y: 0 })],
  ];
  for (const [name, fn] of geometric) {
    it(`finds the lattice after ${name}; the unmarked image stays absent`, async () => {
      await expectFoundAfter(fn, marked, orig, SECRET, MAX_PIXELS, rng);
    });
  }

  it('reads the rotation and the change of aspect off the lattice', async () => {
    const d = await detectFingerprint(await attack('aspect0.75')(marked, rng), SECRET, { maxPixels: MAX_PIXELS });
    // 768x512 -> 576x512 -> base 288x256: the period (32 work px) becomes 24 x 32 base px.
    const [ax, ay, bx, by] = d.lattice as [number, number, number, number];
    const lengths = [Math.hypot(ax, ay), Math.hypot(bx, by)].sort((a, b) => a - b);
    expect(lengths[0]).toBeCloseTo(24, 0);
    expect(lengths[1]).toBeCloseTo(32, 0);
    const r = await detectFingerprint(await attack('rotate10 bg')(marked, rng), SECRET, { maxPixels: MAX_PIXELS });
    const angle = (Math.atan2(r.lattice[1]!, r.lattice[0]!) * 180) / Math.PI;
    expect(Math.abs(Math.abs(((angle + 45) % 90) - 45) - 10)).toBeLessThan(0.5);
  });
});

/** The key bench/fingerprint-robustness.ts marks with, and a photograph of ../shared/natural marked with it. */
const BENCH_KEY = new Uint8Array(32).fill(7);
async function benchMarked(name: string): Promise<{ orig: Buffer; marked: Buffer }> {
  const orig = readFileSync(`${NATURAL}/${name}.png`);
  return { orig, marked: Buffer.from(await embedFingerprint(orig, BENCH_KEY, { maxPixels: MAX_PIXELS })) };
}

/** Quarter crops of a photograph marked with the bench's key at positions (x, y): each found as version 2, none of the unmarked original's. */
async function expectQuarterCropsFound(name: string, positions: [number, number][]): Promise<FingerprintDetail[]> {
  const { orig, marked } = await benchMarked(name);
  const found: FingerprintDetail[] = [];
  for (const [x, y] of positions) found.push(await expectFoundAfter(crop(0.25, { x, y }), marked, orig, BENCH_KEY, MAX_PIXELS, rng));
  return found;
}

describe.skipIf(!existsSync(NATURAL))('fingerprint v2 on ../shared/natural', () => {
  it('survives the chains of the issue on a photograph', async () => {
    const orig = readFileSync(`${NATURAL}/kodim03.png`);
    const marked = Buffer.from(await embedFingerprint(orig, SECRET, { maxPixels: MAX_PIXELS }));
    expect(await psnr(orig, marked)).toBeGreaterThanOrEqual(40);
    for (const name of ['crop50+bright1.5+jpeg80', 'resize1080w+jpeg80', 'screenshot', 'rotate-10 crop', 'crop25 corner', 'resize0.1area']) {
      const d = await detectFingerprint(await attack(name)(marked, rng), SECRET, { maxPixels: MAX_PIXELS });
      expect(d.present, `${name}: z=${d.z} sync=${d.syncZ}`).toBe(true);
      const u = await detectFingerprint(await attack(name)(orig, rng), SECRET, { maxPixels: MAX_PIXELS });
      expect(u.present, `${name} unmarked`).toBe(false);
    }
  });

  it('finds changes of aspect of 2% (the lattice 2% off the no-geometry one on one axis)', async () => {
    // With V2_SAME_AS_IDENTITY at 0.02 such a lattice counted as the no-geometry one and was not folded:
    // kodim01 and kodim05 stretched x0.98 and kodim05 x1.02 were missed (T -1.0, -0.9, 0.6).
    for (const [name, f] of [
      ['kodim01', 0.98],
      ['kodim05', 0.98],
      ['kodim05', 1.02],
    ] as const) {
      const orig = readFileSync(`${NATURAL}/${name}.png`);
      const marked = Buffer.from(await embedFingerprint(orig, SECRET, { maxPixels: MAX_PIXELS }));
      const d = await detectFingerprint(await aspect(f)(marked, rng), SECRET, { maxPixels: MAX_PIXELS });
      expect(d.present, `${name} x${f}: z=${d.z} sync=${d.syncZ}`).toBe(true);
      expect(d.scheme).toBe(2);
      expect((await detectFingerprint(await aspect(f)(orig, rng), SECRET, { maxPixels: MAX_PIXELS })).present).toBe(false);
    }
  });

  it('finds rotations by 9 and 10 degrees of a busy photograph cropped to the inner rectangle (rotation plane)', async () => {
    // kodim05 with the bench's key (--sweep): the grid ranked wrong lattices first on its smoothed plane
    // (comb 1.7-1.9 against 1.5 at the true one), so the true lattice was never folded (T -0.4 and 0.5);
    // on the fine plane it scores 2.6-2.7 and, folded, gives sync z 8.8-9.5 (bench/RESULTS.md, "Fingerprint", step 4).
    const key = new Uint8Array(32).fill(7);
    const orig = readFileSync(`${NATURAL}/kodim05.png`);
    const marked = Buffer.from(await embedFingerprint(orig, key, { maxPixels: MAX_PIXELS }));
    for (const deg of [9, 10]) {
      const d = await detectFingerprint(await rotateCrop(deg)(marked, rng), key, { maxPixels: MAX_PIXELS });
      expect(d.present, `rotate${deg} crop: z=${d.z} sync=${d.syncZ}`).toBe(true);
      expect(d.scheme).toBe(2);
      const angle = (Math.atan2(d.lattice[1]!, d.lattice[0]!) * 180) / Math.PI;
      expect(Math.abs(angle - deg)).toBeLessThan(0.5);
      expect((await detectFingerprint(await rotateCrop(deg)(orig, rng), key, { maxPixels: MAX_PIXELS })).present).toBe(false);
    }
  });

  it('finds quarter crops of a busy photograph through a runner-up alignment or the unrefined lattice', async () => {
    // kodim05 with the bench's key: at these positions the chosen alignment misses (a noise peak beat the
    // true one by a little, or the refinement drifted) while the 2nd peak or the unrefined lattice holds the
    // mark (bench/RESULTS.md, "Fingerprint", steps 8 and 9).
    await expectQuarterCropsFound('kodim05', [
      [0.5, 1],
      [0.75, 1],
      [0, 0],
      [0.25, 0.5],
    ]);
  });

  it('finds a runner-up at the share the runner-ups hold since the re-balancing (0.15 each of the budget)', async () => {
    // With the bench's key the true alignment is the 2nd or 3rd peak of the search, and its count needed
    // 0.146 (kodim05, crop 50% + brightness 1.5 + JPEG 80 at 0.25,0.5) and 0.086 (kodim08, quarter crop
    // at 0.75,0.5) of version 2's budget, over the 0.075 a runner-up held before (docs/fingerprint.md).
    const cases: [string, AttackFn][] = [
      ['kodim05', chain(crop(0.5, { x: 0.25, y: 0.5 }), brightness(1.5), jpeg(80))],
      ['kodim08', crop(0.25, { x: 0.75, y: 0.5 })],
    ];
    for (const [name, fn] of cases) {
      const { orig, marked } = await benchMarked(name);
      await expectFoundAfter(fn, marked, orig, BENCH_KEY, MAX_PIXELS, rng);
    }
  });

  it("finds quarter crops of a busy photograph whose lattice only the crop line's fine plane gives", async () => {
    // kodim05 with the bench's key: the crop line scored on the box-smoothed plane put its maximum 1.5-3%
    // off the true scale (period 64), and the free pattern search left the line, so no candidate lattice
    // was within reach of the fold and these were missed (T -1.3 to 0.8; bench/RESULTS.md, "Fingerprint", step 4).
    const found = await expectQuarterCropsFound('kodim05', [
      [0.5, 0],
      [0.75, 0],
      [0, 0.5],
      [1, 1],
    ]);
    for (const d of found) {
      // The period of a quarter crop at its own size: 64 px both ways (within 2%).
      const [ax, ay, bx, by] = d.lattice as [number, number, number, number];
      for (const len of [Math.hypot(ax, ay), Math.hypot(bx, by)]) expect(Math.abs(len - 64), `lattice ${d.lattice.join(',')}`).toBeLessThan(1.28);
    }
  });

  it('finds quarter crops whose true alignment is an identity look (the identity symmetry on the chosen lattice)', async () => {
    // kodim13 with the bench's key: the lattice was right (period 64) but wrong symmetries, which the
    // template partly matches, ranked above the true alignment (at 0.5,1 the 4th symmetry by sync z, at 1,1
    // the identity's 2nd peak, about 20th overall); T 6.8 and 7.2 there, found by the identity looks
    // (bench/RESULTS.md, "Fingerprint", step 10). Before: T -1.4 and 1.3.
    const found = await expectQuarterCropsFound('kodim13', [
      [0.5, 1],
      [1, 1],
    ]);
    for (const d of found) expect(d.z, `T ${d.z}`).toBeGreaterThan(6);
  });

  it('finds quarter crops that dividing by the local RMS missed, with other marking keys (step 2: the local energy)', async () => {
    // --dense with --mark-key 11 and 41 on the local RMS plane: kodim05 at 0.25,0, 0.25,0.5 and 0.5,0.5 (the
    // true alignment chosen, T 5.1-5.6 for 5.43) and kodim08 at 0.75,0, 1,0 and 1,0.5 (no look at the true one).
    const cases: [string, number, [number, number][]][] = [
      [
        'kodim05',
        11,
        [
          [0.25, 0],
          [0.25, 0.5],
          [0.5, 0.5],
        ],
      ],
      [
        'kodim08',
        41,
        [
          [0.75, 0],
          [1, 0],
          [1, 0.5],
        ],
      ],
    ];
    for (const [name, fill, positions] of cases) {
      const key = new Uint8Array(32).fill(fill);
      const orig = readFileSync(`${NATURAL}/${name}.png`);
      const marked = Buffer.from(await embedFingerprint(orig, key, { maxPixels: MAX_PIXELS }));
      for (const [x, y] of positions) await expectFoundAfter(crop(0.25, { x, y }), marked, orig, key, MAX_PIXELS, rng);
    }
  });

  it('counts the identity looks when the search chose a flip, whatever its sync z (step 10)', async () => {
    // kodim05 marked with key 59, its quarter crop at 0.75,1: the vertical flip won at sync z 7.2 (T -0.8,
    // past the refinement's 6.0, so the looks of an uncertain search did not run); the identity's best peak has T 7.8.
    const key = new Uint8Array(32).fill(59);
    const orig = readFileSync(`${NATURAL}/kodim05.png`);
    const marked = Buffer.from(await embedFingerprint(orig, key, { maxPixels: MAX_PIXELS }));
    const d = await expectFoundAfter(crop(0.25, { x: 0.75, y: 1 }), marked, orig, key, MAX_PIXELS, rng);
    expect(d.dihedral, 'the chosen alignment is still the flip').not.toBe(0);
    expect(d.z).toBeGreaterThan(6);
  });

  it('keeps flat photographs after JPEG 10 and 2% changes of aspect (step 2: the energy floor)', async () => {
    // With the floor at 1 instead of 16, the sky of kodim09 after JPEG 10 (its block edges) outweighed the
    // rest (key 11: sync z under 4.1 at the true lattice), and kodim08 stretched x1.02 (key 23) kept the
    // no-geometry lattice, 2% off, at sync z 8.2 (T 4.7).
    const cases: [string, number, AttackFn][] = [
      ['kodim09', 11, jpeg(10)],
      ['kodim08', 23, aspect(1.02)],
    ];
    for (const [name, fill, fn] of cases) {
      const key = new Uint8Array(32).fill(fill);
      const orig = readFileSync(`${NATURAL}/${name}.png`);
      const marked = Buffer.from(await embedFingerprint(orig, key, { maxPixels: MAX_PIXELS }));
      await expectFoundAfter(fn, marked, orig, key, MAX_PIXELS, rng);
    }
  });

  it("folds the crop line's lattice when a grid hypothesis 3% off and tilted stood in for it", async () => {
    // kodim05 with the bench's key, the quarter crop at (134, 54) that --dense's random crop drew: a grid
    // hypothesis (61.9 x 65.0, tilted 1.7 degrees) was within nearChosen's 2.5 angle steps and 5%, so the
    // crop line's (64 x 64) was not folded (sync z 3.8 against 6.1; bench/RESULTS.md, "Fingerprint", step 4). Since
    // version 2 divides by the local energy (step 2) the chosen lattice is 63.2 x 64.1, tilted 0.2 degrees.
    const { orig, marked } = await benchMarked('kodim05');
    const d = await expectFoundAfter(crop(0.25, { x: 134 / 384, y: 54 / 256 }), marked, orig, BENCH_KEY, MAX_PIXELS, rng);
    const [ax, ay, bx, by] = d.lattice as [number, number, number, number];
    for (const len of [Math.hypot(ax, ay), Math.hypot(bx, by)]) expect(Math.abs(len - 64), `lattice ${d.lattice.join(',')}`).toBeLessThan(1.28);
  });
});
