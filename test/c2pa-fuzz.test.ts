/**
 * C2PA manifest-store mutations (issue #37), a bounded run in `npm test`: JUMBF boxes (lengths, types,
 * dropped boxes), CBOR (lengths, retyped and deeply nested items), the COSE claim signature's protected
 * header, and the X.509 DER of its certificates (lengths, nesting, flipped bits), on the corpus's two
 * C2PA files and PNG, WebP and JPEG files signed here. No mutation may throw past a 4xx code, answer
 * `updated` of an output that does not validate, or grow the reader's memory (test/helpers/c2pa-fuzz.ts);
 * test/long/c2pa-fuzz.test.ts runs more.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadC2paIdentity, type SignerIdentity } from '../src/c2pa/identity.js';
import { type FuzzSeedFile, fuzzSeeds, haveFuzzModel, MUTATIONS, runMutations } from './helpers/c2pa-fuzz.js';

/** Cases per mutation kind and seed file: each reads, builds and reads again (tens of ms). */
const RUNS = Number(process.env.C2PA_FUZZ_RUNS ?? 3);

let dataDir: string;
let identity: SignerIdentity;
let seeds: FuzzSeedFile[];
beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-fuzz-'));
  identity = await loadC2paIdentity({ dataDir });
  seeds = await fuzzSeeds();
}, 60_000);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('C2PA manifest-store mutations (bounded run)', () => {
  it.runIf(haveFuzzModel)(
    `${RUNS} cases per mutation kind and seed file: no 5xx or crash, updated only of valid outputs, the reader's memory bounded`,
    async () => {
      const { ran, tally } = await runMutations(seeds, identity, RUNS, Number(process.env.FUZZ_SEED ?? 37));
      expect(ran).toBeGreaterThanOrEqual(MUTATIONS.length * RUNS);
      // With the fixed seed the run reaches the outcomes that matter: refused (malformed lengths), an
      // invalid parent updated, an untouched or broken store marked, a valid update.
      const outcomes = new Set([...tally.keys()].map((k) => k.split(' ')[1]));
      if (RUNS >= 3 && process.env.FUZZ_SEED === undefined)
        for (const o of ['refused', 'parent-invalid', 'invalidated', 'updated']) expect(outcomes, o).toContain(o);
    },
    600_000,
  );
});
