/**
 * The first requests after a pause, side by side: two optmark servers on loopback, one with the default
 * warm start of the arena (OPTMARK_WARM_INFLIGHT_BYTES) and one that hands every idle page back (0, the
 * behaviour before it), take turns. Each round leaves a server idle long enough for its idle page
 * release, then sends a short burst of protects at a fixed rate, then the same burst again at once (warm).
 * Printed: the (upper) median over rounds of the first requests' p50 and max after the pause, the warm
 * burst's p50, and the ratios to the baseline server.
 *
 *   npm run build && node dist/bench/cold-start.js [--rounds 8] [--idle 5] [--rate 100] [--burst 40] [--image jpeg-12mp]
 */
import { parseArgs } from 'node:util';
import { Client, openLoop, type Target } from './load/client.js';
import { generatedCorpus, prepare, type PreparedRequest } from './load/corpus.js';
import { median as upperMedian } from './load/report.js';
import { startOptmark, type Running } from './load/servers.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    idle: { type: 'string', default: '5' },
    rate: { type: 'string', default: '100' },
    burst: { type: 'string', default: '40' },
    first: { type: 'string', default: '10' },
    image: { type: 'string', default: 'jpeg-12mp' },
  },
});
const rounds = Number(values.rounds);
const idleMs = Number(values.idle) * 1000;
const rate = Number(values.rate);
const burst = Number(values.burst);
const first = Number(values.first);
for (const [name, v] of Object.entries({ rounds, idle: idleMs, rate, burst, first })) {
  if (!(v > 0) || !Number.isFinite(v)) throw new Error(`--${name} expects a positive number`);
}
if (idleMs <= 2000) throw new Error("--idle must exceed the server's 2 s quiet time before it releases idle pages");

const median = (xs: number[]): number => upperMedian(xs)!;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Latencies (ms, in arrival order) of one evenly spaced burst on fresh connections. */
async function burstLatencies(target: Target, req: PreparedRequest): Promise<number[]> {
  const client = new Client(target, 128);
  try {
    const run = await openLoop(client, [req], () => 0, {
      rate,
      durationMs: (burst * 1000) / rate,
      arrivals: 'uniform',
      drainMs: 30_000,
      seed: 1,
      timeoutMs: 30_000,
      warmupMs: 0,
    });
    const failed = run.outcomes.filter((o) => o.status !== 200);
    if (failed.length) throw new Error(`${target.name}: ${failed.length} of ${run.outcomes.length} requests failed (status ${failed[0]!.status})`);
    return run.outcomes.map((o) => o.latencyMs);
  } finally {
    client.close();
  }
}

interface Series {
  name: string;
  label: string;
  server: Running;
  firstP50: number[];
  firstMax: number[];
  warmP50: number[];
}

async function main(): Promise<void> {
  const [image] = await generatedCorpus([values.image!]);
  const req = prepare('protect', image!);
  const servers: Series[] = [];
  try {
    for (const [name, label, env] of [
      ['warm start', 'warm start (default)', {}],
      ['baseline', 'baseline: everything released (OPTMARK_WARM_INFLIGHT_BYTES=0)', { OPTMARK_WARM_INFLIGHT_BYTES: '0' }],
    ] as const) {
      const server = await startOptmark({ inheritConfig: true, logLevel: 'warn', env });
      servers.push({ name, label, server, firstP50: [], firstMax: [], warmP50: [] });
    }
    // One burst each before measuring: JIT, connections and the arena's first touch are not the subject.
    for (const s of servers) await burstLatencies(s.server.target, req);
    console.log(`${req.label}: ${rounds} rounds of ${burst} requests at ${rate} req/s after ${idleMs / 1000} s idle; first ${first} requests compared`);
    for (let r = 0; r < rounds; r++) {
      // Alternate the order, so neither server always runs right after the other's burst.
      for (const s of r % 2 ? [...servers].reverse() : servers) {
        await sleep(idleMs);
        const cold = await burstLatencies(s.server.target, req);
        const warm = await burstLatencies(s.server.target, req);
        s.firstP50.push(median(cold.slice(0, first)));
        s.firstMax.push(Math.max(...cold.slice(0, first)));
        s.warmP50.push(median(warm));
        console.log(
          `  round ${r + 1} ${s.name}: first ${first} after idle p50 ${s.firstP50.at(-1)!.toFixed(1)} ms, max ${s.firstMax.at(-1)!.toFixed(1)} ms; warm burst p50 ${s.warmP50.at(-1)!.toFixed(1)} ms`,
        );
      }
    }
    const [test, base] = servers as [Series, Series];
    console.log('');
    console.log('| server | first requests after idle: p50 (median of rounds) | their max (median of rounds) | warm burst p50 |');
    console.log('|---|---:|---:|---:|');
    for (const s of servers) {
      console.log(`| ${s.label} | ${median(s.firstP50).toFixed(1)} ms | ${median(s.firstMax).toFixed(1)} ms | ${median(s.warmP50).toFixed(1)} ms |`);
    }
    console.log('');
    console.log(
      `warm start / baseline: first-request p50 ${(median(test.firstP50) / median(base.firstP50)).toFixed(2)}x, max ${(median(test.firstMax) / median(base.firstMax)).toFixed(2)}x, warm p50 ${(median(test.warmP50) / median(base.warmP50)).toFixed(2)}x`,
    );
  } finally {
    for (const s of servers) await s.server.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
