/**
 * What the store costs a request, on both engines.
 *
 * SQLite (a real WAL file in a temporary directory, checkpoints on their own thread as the server runs
 * them): authenticate, reserve+commit and reserve+refund through the asynchronous interface the server
 * calls, beside a bare prepared SELECT on the same file (the floor of any SQLite call), an in-memory
 * counter (what a non-durable quota would cost), the same reserve+commit called synchronously (what the
 * asynchronous wrapper adds) and on a store that checkpoints on the calling thread (SQLite's default).
 *
 * PostgreSQL (OPTMARK_BENCH_DATABASE_URL or OPTMARK_TEST_DATABASE_URL, default the local server; a
 * fresh database, dropped after): reserve+commit one at a time (a round trip each) and with 16 in
 * flight (what a busy server sees), beside a bare `SELECT 1` round trip.
 *
 *   npm run build && node dist/bench/quota.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { compare } from './lib/report.js';
import { MAX_LIMIT, SqliteStore, monthOf, type Store } from '../src/store/index.js';
import { PostgresStore } from '../src/store/postgres/engine.js';

async function reserveCommit(store: Store, id: number): Promise<void> {
  const r = await store.reserve(id, 'protect');
  if (!r.ok) throw new Error('over the limit');
  await store.commit(r.reservation);
}

/** Runs the SQLite group and returns reserve+commit per second (through the asynchronous interface). */
export async function run(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-'));
  const store = SqliteStore.openSync({ dataDir: dir, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  store.startBackgroundCheckpoints();
  const inline = SqliteStore.openSync({ dataDir: join(dir, 'inline'), defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  const raw = new Database(store.file);
  try {
    const inlineId = (await inline.createAccount('bench', 'pro')).id;
    await store.createAccount('bench', 'pro');
    const { key } = await store.issueKey('bench');
    const header = `Bearer ${key}`;
    const auth = await store.authenticate(header);
    if (!auth.ok) throw new Error(auth.message);
    const id = auth.account.id;
    const month = monthOf(new Date());
    const select = raw.prepare('SELECT used FROM usage_counters WHERE account_id = ? AND month = ? AND operation = ?');
    // The request path before units were held per instance (#20): one upsert of the counter, one read.
    const bareReserve = raw.prepare(
      `INSERT INTO usage_counters (account_id, month, operation, used) VALUES (?, ?, 'verify', 1)
       ON CONFLICT (account_id, month, operation) DO UPDATE SET used = used + 1 WHERE used < 2147483648 RETURNING used`,
    );
    const bareState = raw.prepare("SELECT used FROM usage_counters WHERE account_id = ? AND month = ? AND operation = 'verify'");
    const memory = new Map<string, number>();
    const memoryKey = `${id}:${month}:protect`;

    const rows = await compare(
      'store (SQLite): per-request cost (WAL, synchronous=NORMAL, one process)',
      { name: 'prepared SELECT (floor)', fn: () => select.get(id, month, 'protect') },
      [
        { name: 'in-memory counter (not durable)', fn: () => memory.set(memoryKey, (memory.get(memoryKey) ?? 0) + 1) },
        { name: 'authenticate', fn: () => store.authenticate(header) },
        { name: 'reserve+commit', fn: () => reserveCommit(store, id) },
        {
          name: 'counter only, no hold (the path before #20)',
          fn: () => {
            bareReserve.all(id, month);
            bareState.get(id, month);
          },
        },
        {
          name: 'reserve+commit, called synchronously',
          fn: () => {
            const r = store.reserveSync(id, 'protect');
            if (!r.ok) throw new Error('over the limit');
            store.commitSync(r.reservation);
          },
        },
        { name: 'reserve+commit, checkpoints on this thread', fn: () => reserveCommit(inline, inlineId) },
        {
          name: 'reserve+refund',
          fn: async () => {
            const r = await store.reserve(id, 'protect');
            if (!r.ok) throw new Error('over the limit');
            await store.refund(r.reservation);
          },
        },
        {
          name: 'request path (auth+reserve+commit)',
          fn: async () => {
            const a = await store.authenticate(header);
            if (!a.ok) throw new Error(a.message);
            await reserveCommit(store, a.account.id);
          },
        },
      ],
      {
        note:
          "reserve is one durable transaction (the counter +1 and this instance's hold +1; no fsync: survives kill -9, the checkpoint thread syncs the WAL every second); " +
          'commit takes the unit off the hold (one write) and reads the counter for the RateLimit headers.',
      },
    );
    const reserveCommitRow = rows.find((r) => r.name === 'reserve+commit')!;
    console.log(`SQLite reserve+commit: ${Math.round(reserveCommitRow.opsPerSec)} per second (p50 ${(reserveCommitRow.p50Ms * 1000).toFixed(1)} µs)`);
    return reserveCommitRow.opsPerSec;
  } finally {
    raw.close();
    await store.stopBackgroundCheckpoints();
    store.closeSync();
    inline.closeSync();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The PostgreSQL group: reserve+commit per second, one at a time and 16 in flight. */
export async function runPostgres(): Promise<number> {
  const base = process.env.OPTMARK_BENCH_DATABASE_URL || process.env.OPTMARK_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `optmark_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  // As the server opens it: counter writes do not wait for the WAL flush.
  const store = await PostgresStore.open({ url: u.href, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT, synchronousCommit: false });
  const durable = await PostgresStore.open({ url: u.href, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  const client = new pg.Client({ connectionString: u.href });
  await client.connect();
  try {
    const { id } = await store.createAccount('bench', 'pro');
    const { key } = await store.issueKey('bench');
    const header = `Bearer ${key}`;
    const batch = async (n: number) => {
      await Promise.all(Array.from({ length: n }, () => reserveCommit(store, id)));
    };
    const rows = await compare(
      'store (PostgreSQL): per-request cost over loopback, pool of 10',
      { name: 'SELECT 1 round trip (floor)', fn: () => client.query('SELECT 1') },
      [
        { name: 'authenticate (cached)', fn: () => store.authenticate(header) },
        { name: 'reserve+commit', fn: () => reserveCommit(store, id) },
        { name: '16 reserve+commit in flight (per batch)', fn: () => batch(16) },
        { name: 'reserve+commit, synchronous_commit on', fn: () => reserveCommit(durable, id) },
      ],
      {
        note:
          "reserve is one statement (counter row +1 while under the limit, and this instance's hold +1), commit one statement (hold -1, counter read); " +
          "the server's sessions run with synchronous_commit off (the last row: each commit waits for an fsync while it holds the counter row).",
      },
    );
    const one = rows.find((r) => r.name === 'reserve+commit')!;
    const sixteen = rows.find((r) => r.name.startsWith('16 '))!;
    console.log(
      `PostgreSQL reserve+commit: ${Math.round(one.opsPerSec)} per second one at a time (p50 ${(one.p50Ms * 1000).toFixed(0)} µs), ` +
        `${Math.round(sixteen.opsPerSec * 16)} per second with 16 in flight`,
    );
    return sixteen.opsPerSec * 16;
  } finally {
    await client.end();
    await store.close();
    await durable.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const sqlite = await run();
  const postgres = await runPostgres();
  console.log(
    `reserve+commit per second: SQLite ${Math.round(sqlite)} (one at a time), PostgreSQL ${Math.round(postgres)} (16 in flight): ${(postgres / sqlite).toFixed(2)}x`,
  );
}
