/**
 * Does the PostgreSQL engine's batching pay? The same closed loop against two stores on one database,
 * one gathering concurrent reserves, commits and refunds into a statement per kind and turn (the default)
 * and one sending each alone (`batching: false`, the plain path), alternating round by round so that the
 * machine's noise falls on both. Each of `c` workers reserves a unit and commits it, again and again, for
 * a fixed time; the figures are reserve+commit per second and the reserve's latency (p50, p99) as a
 * request sees it. Several rounds each: the ranges are the result, not one number.
 *
 *   npm run build && node dist/bench/store-batching.bench.js     (ROUNDS=5 SECONDS=2 CONCURRENCY=16,64)
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { MAX_LIMIT } from '../src/store/index.js';
import { PostgresStore } from '../src/store/postgres/engine.js';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const SECONDS = Number(process.env.SECONDS ?? 2);
const LEVELS = (process.env.CONCURRENCY ?? '16,64').split(',').map(Number);

interface Round {
  perSec: number;
  p50: number;
  p99: number;
}

async function loop(store: PostgresStore, accountId: number, workers: number, ms: number): Promise<Round> {
  const latencies: number[] = [];
  let done = 0;
  const end = performance.now() + ms;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const r = await store.reserve(accountId, 'protect');
        latencies.push(performance.now() - t);
        if (!r.ok) throw new Error('over the limit');
        await store.commit(r.reservation);
        done++;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return { perSec: done / (ms / 1000), p50: at(0.5), p99: at(0.99) };
}

const range = (xs: number[], digits: number) =>
  `${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)} (median ${xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(digits)})`;

async function main(): Promise<void> {
  const base = process.env.OPTMARK_BENCH_DATABASE_URL || process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `optmark_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  const open = (batching: boolean) =>
    PostgresStore.open({ url: u.href, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT, synchronousCommit: false, batching });
  const stores = { batched: await open(true), plain: await open(false) };
  try {
    const { id } = await stores.batched.createAccount('bench', 'pro');
    for (const workers of LEVELS) {
      const out: Record<keyof typeof stores, Round[]> = { batched: [], plain: [] };
      await loop(stores.batched, id, workers, 300); // warm the pools and the prepared statements
      await loop(stores.plain, id, workers, 300);
      for (let i = 0; i < ROUNDS; i++) {
        const order: (keyof typeof stores)[] = i % 2 === 0 ? ['batched', 'plain'] : ['plain', 'batched'];
        for (const k of order) out[k].push(await loop(stores[k], id, workers, SECONDS * 1000));
      }
      for (const k of ['batched', 'plain'] as const) {
        const r = out[k];
        console.log(
          `${workers} in flight, ${k.padEnd(7)}: reserve+commit/s ${range(
            r.map((x) => x.perSec),
            0,
          )}; reserve p50 ms ${range(
            r.map((x) => x.p50),
            2,
          )}; p99 ms ${range(
            r.map((x) => x.p99),
            2,
          )}`,
        );
      }
    }
  } finally {
    await stores.batched.close();
    await stores.plain.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
