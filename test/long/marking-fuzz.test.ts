// The marking fuzz of test/marking-fuzz.test.ts at full length: 10,000 mutated files per format (npm test
// runs 1,500 of the same seeded sequence). FUZZ_RUNS overrides both.
process.env.FUZZ_RUNS ??= '10000';
await import('../marking-fuzz.test.js');
