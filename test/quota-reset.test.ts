// The reset instant the 429 message and `optmark usage` name: the first minute of the next UTC month.
import { describe, expect, it } from 'vitest';
import { resetInstantOf, resetTimeOf, utcMinuteText } from '../src/store/index.js';
import { quotaStateOf } from '../src/store/quota.js';

describe('quota reset time', () => {
  it.each([
    ['2026-11-24T06:20:00Z', '2026-12-01 00:00 UTC'],
    ['2026-12-31T23:59:59.999Z', '2027-01-01 00:00 UTC'],
    ['2027-01-01T00:00:00Z', '2027-02-01 00:00 UTC'],
    ['2028-02-29T12:00:00Z', '2028-03-01 00:00 UTC'],
  ])('at %s the counters reset at %s', (now, text) => {
    expect(utcMinuteText(resetTimeOf(new Date(now)))).toBe(text);
  });

  it.each([0, 1, 999, 2_000, 60_000, 3_600_000])("the instant named from a state built %d ms before is the counter's own month end", (delayMs) => {
    for (const built of ['2026-11-30T23:59:58.500Z', '2026-11-25T01:48:00Z', '2026-12-31T23:00:00Z', '2028-02-29T23:59:59Z']) {
      const t0 = new Date(built);
      const month = t0.toISOString().slice(0, 7);
      const state = quotaStateOf('protect', 20, 20, month, t0);
      const named = resetInstantOf(state.resetSeconds, new Date(t0.getTime() + delayMs));
      expect(named.getTime(), `${built} + ${delayMs} ms`).toBe(resetTimeOf(t0).getTime());
    }
  });
});
