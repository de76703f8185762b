/**
 * A reference for the tail latency the arrivals alone cause: an ideal machine with the same cores where
 * every request needs the same CPU time, uses one core at most, and the cores are shared evenly among the
 * requests in progress (processor sharing), with nothing else going on: no event-loop hand-offs, no
 * kernel, no other processes. Its p99/p50 at a rate is what queueing at that load costs any server, so
 * a step's measured ratio is read against it: with Poisson arrivals at 55% of two cores even this ideal
 * machine has p99 above 3x p50; with evenly spaced arrivals it has none (ratio 1) until saturation.
 *
 * With one service demand, processor sharing finishes requests in arrival order: each one's finish is
 * its arrival's "virtual time" (work done per request so far) plus the demand, so a FIFO of finish
 * marks replaces any priority queue and the simulation is O(n).
 */
import { prng } from './corpus.js';

export interface QueueReference {
  /** CPU ms per request the model was given (server + load generator, as measured in the step). */
  demandMs: number;
  /** Offered CPU over the machine's cores. */
  utilisation: number;
  mean: number;
  p50: number;
  p99: number;
}

/**
 * Simulates `requests` arrivals (after `warmup` discarded ones) at `rate` per second with `arrivals`
 * spacing; undefined when the load is at or above the machine's capacity (no steady state to report).
 */
export function idealQueue(
  rate: number,
  demandMs: number,
  cores: number,
  arrivals: 'poisson' | 'uniform',
  seed = 1,
  requests = 40_000,
  warmup = 2_000,
): QueueReference | undefined {
  const utilisation = (rate * demandMs) / 1000 / cores;
  if (!(rate > 0 && demandMs > 0 && cores > 0) || utilisation >= 0.98) return undefined;
  const rand = prng(seed);
  const gap = 1000 / rate;
  const n = warmup + requests;
  const finish: number[] = []; // virtual finish marks of requests in progress, in arrival order
  const arrivedAt: number[] = [];
  let head = 0;
  let now = 0; // real ms
  let virtual = 0; // work done on each request in progress so far, ms
  let nextArrival = 0;
  let arrived = 0;
  const latencies: number[] = [];
  while (arrived < n || head < finish.length) {
    const active = finish.length - head;
    const speed = active === 0 ? 0 : Math.min(1, cores / active); // CPU ms per real ms for each request
    const toFinish = active === 0 ? Infinity : (finish[head]! - virtual) / speed;
    const toArrival = arrived < n ? nextArrival - now : Infinity;
    if (toArrival <= toFinish) {
      virtual += toArrival * speed;
      now = nextArrival;
      finish.push(virtual + demandMs);
      arrivedAt.push(now);
      arrived++;
      nextArrival += arrivals === 'uniform' ? gap : -Math.log(1 - rand()) * gap;
    } else {
      virtual = finish[head]!;
      now += toFinish;
      if (head >= warmup) latencies.push(now - arrivedAt[head]!);
      head++;
    }
  }
  let sum = 0;
  for (const l of latencies) sum += l;
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)]!;
  return { demandMs, utilisation, mean: sum / latencies.length, p50: at(0.5), p99: at(0.99) };
}
