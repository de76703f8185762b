/**
 * Protect throughput against the number of instances, with the SQLite store and with PostgreSQL, side by
 * side on this machine.
 *
 * For n = 1..INSTANCES (default 3): n `optmark serve` processes, each with its default worker pool.
 * SQLite: all n on one data directory (one WAL file, as several processes on one machine share it).
 * PostgreSQL: each with a data directory of its own and OPTMARK_DATABASE_URL on a fresh database
 * (OPTMARK_BENCH_DATABASE_URL or OPTMARK_TEST_DATABASE_URL, default the local server; dropped after).
 * A closed loop of CONCURRENCY protects of one corpus image (default jpeg-1mp) spread over the instances
 * in turn by the capacity client (`bench load --url a --url b` does the same), for SECONDS each, after a
 * short warm-up; SQLite and PostgreSQL alternate at each n, so both see the same machine. Prints protects
 * per second, the PostgreSQL/SQLite ratio at each n, and each engine's growth over n = 1.
 *
 *   npm run build && node dist/bench/instances.bench.js     (INSTANCES=3 SECONDS=10 CONCURRENCY=8 IMAGE=jpeg-1mp; BENCH_QUICK=1)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Client, closedLoop } from '../src/capacity/client.js';
import { generatedCorpus, prepare } from '../src/capacity/corpus.js';
import { startOptmark, type Running } from '../src/capacity/servers.js';
import { QUICK } from './lib/report.js';

const INSTANCES = Number(process.env.INSTANCES ?? 3);
const SECONDS = Number(process.env.SECONDS ?? (QUICK ? 2 : 10));
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const IMAGE = process.env.IMAGE ?? 'jpeg-1mp';

type Engine = 'sqlite' | 'postgres';

async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const base = process.env.OPTMARK_BENCH_DATABASE_URL || process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `optmark_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(base);
  u.pathname = `/${name}`;
  return {
    url: u.href,
    drop: async () => {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Starts n instances on one store of the engine; the first one's key works on all (one account). */
async function startInstances(engine: Engine, n: number, databaseUrl: string): Promise<{ servers: Running[]; cleanup: () => void }> {
  const shared = mkdtempSync(join(tmpdir(), 'optmark-bench-instances-'));
  const servers: Running[] = [];
  const env = { OPTMARK_LOG_LEVEL: 'warn', ...(engine === 'postgres' ? { OPTMARK_DATABASE_URL: databaseUrl } : {}) };
  for (let i = 0; i < n; i++) servers.push(await startOptmark({ inheritConfig: false, env, ...(engine === 'sqlite' ? { dataDir: shared } : {}) }));
  return { servers, cleanup: () => rmSync(shared, { recursive: true, force: true }) };
}

async function measure(engine: Engine, n: number, databaseUrl: string, body: ReturnType<typeof prepare>): Promise<number> {
  const { servers, cleanup } = await startInstances(engine, n, databaseUrl);
  try {
    const first = servers[0]!.target;
    const client = new Client({ ...first, urls: servers.map((s) => s.target.url) }, CONCURRENCY);
    const timeoutMs = 60_000;
    // Warm-up: every instance's workers loaded, connections open.
    await closedLoop(client, [body], () => 0, CONCURRENCY * 2, CONCURRENCY, timeoutMs);
    let done = 0;
    let failed = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < SECONDS * 1000) {
      const { outcomes } = await closedLoop(client, [body], () => 0, CONCURRENCY * 4, CONCURRENCY, timeoutMs);
      done += outcomes.filter((o) => o.status === 200).length;
      failed += outcomes.filter((o) => o.status !== 200).length;
    }
    const perSecond = done / ((performance.now() - t0) / 1000);
    client.close();
    if (failed > 0) console.log(`  (${engine}, ${n}: ${failed} requests failed)`);
    return perSecond;
  } finally {
    for (const s of servers) await s.stop();
    cleanup();
  }
}

const [image] = await generatedCorpus([IMAGE]);
if (!image) throw new Error(`no corpus image ${IMAGE}`);
const body = prepare('protect', image);
const db = await freshDatabase();
console.log(
  `protect of ${image.name} (${(image.bytes.length / 1e6).toFixed(2)} MB), ${CONCURRENCY} in flight, ${SECONDS} s per point, ${cpus().length} cores, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
const results: Record<Engine, number[]> = { sqlite: [], postgres: [] };
try {
  for (let n = 1; n <= INSTANCES; n++) {
    // Alternate which engine goes first, so neither always gets the quieter moment.
    const order: Engine[] = n % 2 === 1 ? ['sqlite', 'postgres'] : ['postgres', 'sqlite'];
    for (const engine of order) results[engine][n - 1] = await measure(engine, n, db.url, body);
    const s = results.sqlite[n - 1]!;
    const p = results.postgres[n - 1]!;
    console.log(`${n} instance${n === 1 ? ' ' : 's'}: SQLite ${s.toFixed(1)}/s, PostgreSQL ${p.toFixed(1)}/s, PostgreSQL/SQLite ${(p / s).toFixed(2)}`);
  }
} finally {
  await db.drop();
}
console.log('\n| instances | SQLite protects/s | vs 1 | PostgreSQL protects/s | vs 1 | PostgreSQL/SQLite |');
console.log('|---|---|---|---|---|---|');
for (let n = 1; n <= INSTANCES; n++) {
  const s = results.sqlite[n - 1]!;
  const p = results.postgres[n - 1]!;
  console.log(
    `| ${n} | ${s.toFixed(1)} | ${(s / results.sqlite[0]!).toFixed(2)} | ${p.toFixed(1)} | ${(p / results.postgres[0]!).toFixed(2)} | ${(p / s).toFixed(2)} |`,
  );
}
console.log(`load average at the end: ${loadavg()[0]!.toFixed(1)}`);
