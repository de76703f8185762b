import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // Suites start real servers and worker pools; two cores are shared among them.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
