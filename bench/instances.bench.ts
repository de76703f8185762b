/**
 * Protect throughput against the number of instances, with the SQLite store and with PostgreSQL, side by
 * side on this machine.
 *
 * For n = 1..INSTANCES (default 3): n `optmark serve` processes, each with its default worker pool.
 * SQLite: all n on one data directory (one WAL file, as several processes on one machine share it).
 * PostgreSQL: each with a data directory of its own and OPTMARK_DATABASE_URL on a fresh database
 * (OPTMARK_BENCH_DATABASE_URL or OPTMARK_TEST_DATABASE_URL, default the local server; dropped after).
 * A closed loop of CONCURRENCY protects of one corpus image spread over the instances in turn by the
 * capacity client (`bench load --url a --url b` does the same), for each of IMAGES (default the 1 MP JPEG
 * and the 12 MP one stock agencies send: the store's cost per protect is the same, the image work is
 * about fifteen times larger). At each n both engines' instances are up at once and take ROUNDS turns of
 * SECONDS each (after a short warm-up), alternating which goes first, so a change in the machine's load
 * falls on both alike. Prints protects per second (the median of the rounds), the PostgreSQL/SQLite ratio
 * at each n (the median of the rounds' ratios, with their range and every round's), and each engine's
 * growth over n = 1. Beside it, CPU per protect from /proc: of the optmark processes and, for PostgreSQL,
 * of the database's backends (the work SQLite does inside the process).
 *
 *   npm run build && node dist/bench/instances.bench.js
 *   (INSTANCES=3 ROUNDS=5 SECONDS=4 CONCURRENCY=8 IMAGES=jpeg-1mp,jpeg-12mp; BENCH_QUICK=1 for one short round)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Client, closedLoop } from './load/client.js';
import { generatedCorpus, prepare, type PreparedRequest } from './load/corpus.js';
import { processCpu } from './load/proc.js';
import { startOptmark, type Running } from './load/servers.js';
import { QUICK } from './lib/report.js';

const INSTANCES = Number(process.env.INSTANCES ?? 3);
const SECONDS = Number(process.env.SECONDS ?? (QUICK ? 2 : 4));
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const IMAGES = (process.env.IMAGES ?? process.env.IMAGE ?? 'jpeg-1mp,jpeg-12mp').split(',');
const ROUNDS = Number(process.env.ROUNDS ?? (QUICK ? 1 : 5));
const TIMEOUT_MS = 60_000;

type Engine = 'sqlite' | 'postgres';

async function freshDatabase(): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
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
    name,
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

interface Side {
  servers: Running[];
  client: Client;
  cleanup: () => void;
}

async function startSide(engine: Engine, n: number, databaseUrl: string, body: PreparedRequest): Promise<Side> {
  const { servers, cleanup } = await startInstances(engine, n, databaseUrl);
  const first = servers[0]!.target;
  const client = new Client({ ...first, urls: servers.map((s) => s.target.url) }, CONCURRENCY);
  // Warm-up: every instance's workers loaded, connections open.
  await closedLoop(client, [body], () => 0, CONCURRENCY * 2, CONCURRENCY, TIMEOUT_MS);
  return { servers, client, cleanup };
}

async function stopSide(side: Side): Promise<void> {
  side.client.close();
  for (const s of side.servers) await s.stop();
  side.cleanup();
}

interface Turn {
  rate: number;
  /** CPU ms per protect of the optmark processes, and of the PostgreSQL backends serving them. */
  serverMs: number;
  backendMs: number;
}

/** CPU-seconds so far of the PostgreSQL backends connected to the bench's database (same machine). */
async function backendCpu(): Promise<Map<number, number>> {
  const r = await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.name]);
  const out = new Map<number, number>();
  for (const { pid } of r.rows) {
    const cpu = processCpu(pid);
    if (cpu !== undefined) out.set(pid, cpu);
  }
  return out;
}

const serverCpu = (side: Side): number => side.servers.reduce((sum, s) => sum + (s.target.pid === undefined ? 0 : (processCpu(s.target.pid) ?? 0)), 0);

/** Protects per second through one side's instances for `seconds` (a closed loop of CONCURRENCY). */
async function measure(engine: Engine, n: number, side: Side, seconds: number, body: PreparedRequest): Promise<Turn> {
  let done = 0;
  let failed = 0;
  const s0 = serverCpu(side);
  const b0 = await backendCpu();
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) {
    const { outcomes } = await closedLoop(side.client, [body], () => 0, CONCURRENCY * 2, CONCURRENCY, TIMEOUT_MS);
    done += outcomes.filter((o) => o.status === 200).length;
    failed += outcomes.filter((o) => o.status !== 200).length;
  }
  const rate = done / ((performance.now() - t0) / 1000);
  const serverMs = ((serverCpu(side) - s0) * 1000) / Math.max(1, done);
  // Backends that came during the turn count whole; the other engine's side has none.
  let backend = 0;
  for (const [pid, cpu] of await backendCpu()) backend += cpu - (b0.get(pid) ?? 0);
  if (failed > 0) console.log(`  (${engine}, ${n}: ${failed} requests failed)`);
  return { rate, serverMs, backendMs: engine === 'postgres' ? (backend * 1000) / Math.max(1, done) : 0 };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const db = await freshDatabase();
const monitor = new pg.Client({
  connectionString: process.env.OPTMARK_BENCH_DATABASE_URL || process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
});
await monitor.connect();
console.log(
  `protect of ${IMAGES.join(' and ')}, ${CONCURRENCY} in flight, ${ROUNDS} rounds of ${SECONDS} s per engine and count, ${cpus().length} cores, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);

interface Row {
  image: string;
  n: number;
  rate: Record<Engine, number>;
  /** PostgreSQL/SQLite of each round. */
  ratios: number[];
  cpu: Record<Engine, { server: number; backend: number }>;
}

/** Both engines at 1..INSTANCES instances with one image. */
async function runImage(name: string): Promise<Row[]> {
  const [image] = await generatedCorpus([name]);
  if (!image) throw new Error(`no corpus image ${name}`);
  const body = prepare('protect', image);
  console.log(`\n${image.name}: ${(image.bytes.length / 1e6).toFixed(2)} MB`);
  const rows: Row[] = [];
  for (let n = 1; n <= INSTANCES; n++) {
    // Both engines' instances run at once (idle while the other is measured); ROUNDS short turns each,
    // alternating which goes first, so a change in the machine's load falls on both alike. The ratio is
    // the median of the rounds' ratios.
    const sides = { sqlite: await startSide('sqlite', n, db.url, body), postgres: await startSide('postgres', n, db.url, body) };
    const rounds: Record<Engine, Turn>[] = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const order: Engine[] = (n + r) % 2 === 1 ? ['sqlite', 'postgres'] : ['postgres', 'sqlite'];
        const round = {} as Record<Engine, Turn>;
        for (const engine of order) round[engine] = await measure(engine, n, sides[engine], SECONDS, body);
        rounds.push(round);
      }
    } finally {
      await stopSide(sides.sqlite);
      await stopSide(sides.postgres);
    }
    const of = (engine: Engine) => ({
      server: median(rounds.map((r) => r[engine].serverMs)),
      backend: median(rounds.map((r) => r[engine].backendMs)),
    });
    const row: Row = {
      image: image.name,
      n,
      rate: { sqlite: median(rounds.map((r) => r.sqlite.rate)), postgres: median(rounds.map((r) => r.postgres.rate)) },
      ratios: rounds.map((r) => r.postgres.rate / r.sqlite.rate),
      cpu: { sqlite: of('sqlite'), postgres: of('postgres') },
    };
    rows.push(row);
    console.log(
      `${n} instance${n === 1 ? ' ' : 's'}: SQLite ${row.rate.sqlite.toFixed(1)}/s, PostgreSQL ${row.rate.postgres.toFixed(1)}/s, ` +
        `PostgreSQL/SQLite ${median(row.ratios).toFixed(2)} (rounds: ${row.ratios.map((x) => x.toFixed(2)).join(' ')}); ` +
        `CPU ms per protect: SQLite server ${row.cpu.sqlite.server.toFixed(2)}, PostgreSQL server ${row.cpu.postgres.server.toFixed(2)} + backends ${row.cpu.postgres.backend.toFixed(2)}`,
    );
  }
  return rows;
}

const rows: Row[] = [];
try {
  for (const name of IMAGES) rows.push(...(await runImage(name)));
} finally {
  await monitor.end();
  await db.drop();
}
console.log(
  '\n| image | instances | SQLite protects/s | vs 1 | PostgreSQL protects/s | vs 1 | PostgreSQL/SQLite, median (range) | CPU ms/protect SQLite | CPU ms/protect PostgreSQL (server + backends) |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  const one = rows.find((r) => r.image === row.image && r.n === 1)!;
  console.log(
    `| ${row.image} | ${row.n} | ${row.rate.sqlite.toFixed(1)} | ${(row.rate.sqlite / one.rate.sqlite).toFixed(2)} | ${row.rate.postgres.toFixed(1)} | ` +
      `${(row.rate.postgres / one.rate.postgres).toFixed(2)} | ${median(row.ratios).toFixed(2)} (${Math.min(...row.ratios).toFixed(2)}-${Math.max(...row.ratios).toFixed(2)}) | ` +
      `${row.cpu.sqlite.server.toFixed(2)} | ${row.cpu.postgres.server.toFixed(2)} + ${row.cpu.postgres.backend.toFixed(2)} |`,
  );
}
console.log(`load average at the end: ${loadavg()[0]!.toFixed(1)}`);
