// The phases of a request (src/http/timing.ts) and how the load generator reads them back.
import { describe, expect, it } from 'vitest';
import type { Outcome } from '../bench/load/client.js';
import { phaseBreakdown, phaseTimes } from '../bench/load/step.js';
import { Phases, parseServerTiming } from '../src/http/timing.js';

const ms = (x: number): bigint => BigInt(Math.round(x * 1e6));

describe('Phases', () => {
  it("splits the time after the body into the wait and the worker's own time", () => {
    const p = new Phases(ms(1000));
    expect(p.headers()).toEqual({});
    expect(p.fields()).toEqual({});
    p.received(ms(1002.5));
    expect(p.headers()).toEqual({ 'Server-Timing': 'receive;dur=2.50' });
    p.worked(4.25, ms(1002.5 + 5));
    expect(p.headers()).toEqual({ 'Server-Timing': 'receive;dur=2.50, queue;dur=0.75, work;dur=4.25' });
    expect(p.fields()).toEqual({ receiveMs: 2.5, queueMs: 0.75, workMs: 4.25 });
  });

  it('never reports more work than the round trip, nor a negative wait; no worker time means it all was the wait', () => {
    const p = new Phases(ms(0));
    p.received(ms(1));
    p.worked(9, ms(4)); // a worker clock running ahead of the round trip
    expect(p.fields()).toEqual({ receiveMs: 1, queueMs: 0, workMs: 3 });
    const q = new Phases(ms(0));
    q.received(ms(1));
    q.worked(undefined, ms(3));
    expect(q.headers()).toEqual({ 'Server-Timing': 'receive;dur=1.00, queue;dur=2.00' });
    const r = new Phases(ms(0));
    r.worked(1, ms(2)); // no body yet: nothing to split
    expect(r.fields()).toEqual({});
  });
});

describe('parseServerTiming', () => {
  it('reads durations by name and skips what it cannot read', () => {
    expect(parseServerTiming('receive;dur=2.41, queue;dur=0.12, work;dur=5.03')).toEqual({ receive: 2.41, queue: 0.12, work: 5.03 });
    expect(parseServerTiming('cache;desc="hit", db;dur=53, app;desc=x;dur=47.2')).toEqual({ db: 53, app: 47.2 });
    expect(parseServerTiming('')).toEqual({});
    expect(parseServerTiming(',;dur=3, x;dur=abc')).toEqual({});
  });
});

const outcome = (latencyMs: number, headMs: number | undefined, phases?: Record<string, number>): Outcome => ({
  status: 200,
  latencyMs,
  lagMs: 0,
  doneAt: 0,
  bytesOut: 0,
  bytesIn: 0,
  retryAfter: false,
  kind: 0,
  ...(headMs === undefined ? {} : { headMs }),
  ...(phases ? { phases } : {}),
});

describe('phaseBreakdown', () => {
  it('splits each answer into outside, receive, queue, work and read', () => {
    expect(phaseTimes(outcome(10, 8, { receive: 2, queue: 1, work: 4 }))).toEqual({ outside: 1, receive: 2, queue: 1, work: 4, read: 2 });
    expect(phaseTimes(outcome(10, 8, { receive: 2, work: 4 }))).toBeUndefined();
    expect(phaseTimes(outcome(10, undefined, { receive: 2, queue: 1, work: 4 }))).toBeUndefined();
  });

  it('compares the slowest 1% with the middle fifth, part by part', () => {
    // 200 answers: all alike but the three slowest (p99 and above), which waited 30 ms for a worker.
    const answers = Array.from({ length: 200 }, (_, i) => {
      const stalled = i >= 197;
      const queue = stalled ? 30 : 1;
      return outcome(8 + queue + i * 0.001, 7 + queue + i * 0.001, { receive: 2, queue, work: 4 });
    });
    answers.push(outcome(99, undefined)); // no phases (e.g. another server): left out
    const b = phaseBreakdown(answers)!;
    expect(b.answers).toBe(200);
    expect(b.slowestCount).toBe(3);
    expect(b.slowest.queue).toBeCloseTo(30, 9);
    expect(b.middle.queue).toBeCloseTo(1, 9);
    expect(b.slowest.work).toBeCloseTo(4, 9);
    expect(b.middle.read).toBeCloseTo(1, 9);
    expect(b.p99.queue).toBe(30);
    expect(phaseBreakdown([outcome(5, 4)])).toBeUndefined();
  });
});
