/**
 * The C2PA manifest-store mutations of test/c2pa-fuzz.test.ts run longer (C2PA_FUZZ_RUNS cases per kind
 * and seed file, default 60, about 3,000 cases; random seed unless FUZZ_SEED). The property lives in
 * test/helpers/c2pa-fuzz.ts; the counts are printed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadC2paIdentity, type SignerIdentity } from '../../src/c2pa/identity.js';
import { type FuzzSeedFile, fuzzSeeds, haveFuzzModel, runMutations } from '../helpers/c2pa-fuzz.js';

const RUNS = Number(process.env.C2PA_FUZZ_RUNS ?? 60);
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));

let dataDir: string;
let identity: SignerIdentity;
let seeds: FuzzSeedFile[];
beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-fuzz-long-'));
  identity = await loadC2paIdentity({ dataDir });
  seeds = await fuzzSeeds();
}, 60_000);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('C2PA manifest-store mutations (long run)', () => {
  it.runIf(haveFuzzModel)(
    `${RUNS} cases per kind and seed file`,
    async () => {
      const { ran, tally } = await runMutations(seeds, identity, RUNS, SEED);
      console.log(`c2pa fuzz (seed ${SEED}): ${ran} cases`, Object.fromEntries([...tally].sort()));
      expect(ran).toBeGreaterThan(0);
    },
    3_600_000,
  );
});
