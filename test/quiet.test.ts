// The idle page release's timing policy, on fake timers: it acts after an unbroken quiet stretch, never in
// the gaps of a steady load, and not while work is in flight.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { QuietTimer } from '../src/transfer/idle.js';

describe('QuietTimer', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const setup = () => {
    let inflight = 0;
    let fired = 0;
    const t = new QuietTimer(
      2000,
      () => inflight > 0,
      () => fired++,
      () => Date.now(),
    );
    const request = (ms: number) => {
      inflight++;
      setTimeout(() => {
        if (--inflight === 0) t.idle();
      }, ms);
    };
    return { t, request, fired: () => fired };
  };

  it('acts once, the quiet time after the last request', () => {
    const { request, fired } = setup();
    request(10);
    vi.advanceTimersByTime(10 + 1999);
    expect(fired()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired()).toBe(1);
    vi.advanceTimersByTime(60_000);
    expect(fired()).toBe(1);
  });

  it('never acts in the gaps of a steady load, however often nothing is in flight', () => {
    const { request, fired } = setup();
    // A 9 ms request every 50 ms for 20 s: idle 82% of the time, never for 2 s at once.
    for (let at = 0; at < 20_000; at += 50) setTimeout(() => request(9), at);
    vi.advanceTimersByTime(20_000);
    expect(fired()).toBe(0);
    vi.advanceTimersByTime(2_000);
    expect(fired()).toBe(1);
  });

  it('does not act while a request is in flight when its time comes, and waits for the next quiet stretch', () => {
    const { request, fired } = setup();
    request(5);
    vi.advanceTimersByTime(1_000);
    request(5_000); // still running when the first timer fires at 2005 ms
    vi.advanceTimersByTime(1_500);
    expect(fired()).toBe(0);
    vi.advanceTimersByTime(3_500 + 1_999);
    expect(fired()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(fired()).toBe(1);
  });

  it('stop() cancels a pending action', () => {
    const { t, request, fired } = setup();
    request(1);
    vi.advanceTimersByTime(1);
    t.stop();
    vi.advanceTimersByTime(10_000);
    expect(fired()).toBe(0);
  });
});
