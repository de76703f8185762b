import { statSync } from 'node:fs';
import { basename, relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that start several servers or processes and take the longest. Without timings of an earlier run
 * (a fresh clone: vitest keeps them in node_modules/.vite), vitest runs the files in alphabetical order, which
 * left some of these for the end, running alone on one worker while the other had nothing to do. They go
 * first; the rest follow, largest first. Once vitest has timings for every file, its own order (longest first)
 * holds.
 */
const HEAVY_FIRST = [
  'http-ops',
  'batch-cli',
  'http-quota',
  'http-limits',
  'dashboard',
  'serve-port',
  'mark-cli',
  'http-api',
  'hostile-files',
  'hostile-fuzz',
  'store',
  'slow-bodies',
  'marking',
];

class HeavyFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const timed = files.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${relative(this.ctx.config.root, f.moduleId)}`));
    if (timed) return sorted;
    const rank = (f: TestSpecification): number => {
      const i = HEAVY_FIRST.indexOf(basename(f.moduleId, '.test.ts'));
      return i < 0 ? HEAVY_FIRST.length : i;
    };
    const size = (f: TestSpecification): number => statSync(f.moduleId).size;
    return sorted.sort((a, b) => rank(a) - rank(b) || size(b) - size(a));
  }
}

/**
 * `npm test`: every test/*.test.ts, in at most 5 minutes on a 2-core machine. Soak, load, browser-heavy
 * and long fuzz runs live in test/long/ and run with `npm run test:long` (vitest.long.config.ts), which
 * CI runs after `npm test`. Test convention: docs/testing.md.
 */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/long/**', '**/node_modules/**'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // Suites start real servers and worker pools; two cores are shared among them.
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { sequencer: HeavyFirst },
    // A private PostgreSQL cluster when none answers (test/setup/postgres.ts).
    globalSetup: ['test/setup/postgres.ts'],
  },
});
