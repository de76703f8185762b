// The reset instant the 429 message and `optmark usage` name: the first minute of the next UTC month.
import { describe, expect, it } from 'vitest';
import { resetTimeOf, utcMinuteText } from '../src/store/index.js';

describe('quota reset time', () => {
  it.each([
    ['2026-11-24T06:20:00Z', '2026-12-01 00:00 UTC'],
    ['2026-12-31T23:59:59.999Z', '2027-01-01 00:00 UTC'],
    ['2027-01-01T00:00:00Z', '2027-02-01 00:00 UTC'],
    ['2028-02-29T12:00:00Z', '2028-03-01 00:00 UTC'],
  ])('at %s the counters reset at %s', (now, text) => {
    expect(utcMinuteText(resetTimeOf(new Date(now)))).toBe(text);
  });
});
