import { defineConfig } from 'vitest/config';

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
  },
});
