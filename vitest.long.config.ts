import { defineConfig } from 'vitest/config';

/** `npm run test:long`: the long runs kept out of `npm test` (test/long/; docs/testing.md). CI runs both. */
export default defineConfig({
  test: {
    include: ['test/long/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 600_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
    minWorkers: 1,
  },
});
