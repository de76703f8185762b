/**
 * What the store costs a request: authenticate, reserve+commit and reserve+refund on a real WAL file in
 * a temporary directory, with WAL checkpoints on their own thread as the server runs them, beside a bare
 * prepared SELECT on the same file (the floor of any SQLite call), an in-memory counter (what a
 * non-durable quota would cost) and reserve+commit on a store that checkpoints on the calling thread
 * (SQLite's default: a sync every 1000 pages, inside the commit that crosses them).
 *
 *   npm run build && node dist/bench/quota.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { compare } from './lib/report.js';
import { MAX_LIMIT, Store, monthOf } from '../src/store/index.js';

/** Runs the quota group and returns reserve+commit per second. */
export async function run(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-'));
  const store = Store.open({ dataDir: dir, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  store.startBackgroundCheckpoints();
  const inline = Store.open({ dataDir: join(dir, 'inline'), defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  const raw = new Database(store.file);
  try {
    const inlineId = inline.createAccount('bench', 'pro').id;
    store.createAccount('bench', 'pro');
    const { key } = store.issueKey('bench');
    const header = `Bearer ${key}`;
    const auth = store.authenticate(header);
    if (!auth.ok) throw new Error(auth.message);
    const id = auth.account.id;
    const month = monthOf(new Date());
    const select = raw.prepare('SELECT used FROM usage_counters WHERE account_id = ? AND month = ? AND operation = ?');
    const memory = new Map<string, number>();
    const memoryKey = `${id}:${month}:protect`;

    const rows = await compare(
      'store: per-request cost (WAL, synchronous=NORMAL, one process)',
      { name: 'prepared SELECT (floor)', fn: () => select.get(id, month, 'protect') },
      [
        {
          name: 'in-memory counter (not durable)',
          fn: () => memory.set(memoryKey, (memory.get(memoryKey) ?? 0) + 1),
        },
        { name: 'authenticate', fn: () => store.authenticate(header) },
        {
          name: 'reserve+commit',
          fn: () => {
            const r = store.reserve(id, 'protect');
            if (!r.ok) throw new Error('over the limit');
            store.commit(r.reservation);
          },
        },
        {
          name: 'reserve+commit, checkpoints on this thread',
          fn: () => {
            const r = inline.reserve(inlineId, 'protect');
            if (!r.ok) throw new Error('over the limit');
            inline.commit(r.reservation);
          },
        },
        {
          name: 'reserve+refund',
          fn: () => {
            const r = store.reserve(id, 'protect');
            if (!r.ok) throw new Error('over the limit');
            store.refund(r.reservation);
          },
        },
        {
          name: 'request path (auth+reserve+commit)',
          fn: () => {
            const a = store.authenticate(header);
            if (!a.ok) throw new Error(a.message);
            const r = store.reserve(a.account.id, 'protect');
            if (!r.ok) throw new Error('over the limit');
            store.commit(r.reservation);
          },
        },
      ],
      { note: 'reserve is one durable upsert (no fsync: survives kill -9; the checkpoint thread syncs the WAL every second); commit writes nothing.' },
    );
    const reserveCommit = rows.find((r) => r.name === 'reserve+commit')!;
    console.log(`reserve+commit: ${Math.round(reserveCommit.opsPerSec)} per second (p50 ${(reserveCommit.p50Ms * 1000).toFixed(1)} µs)`);
    return reserveCommit.opsPerSec;
  } finally {
    raw.close();
    await store.stopBackgroundCheckpoints();
    store.close();
    inline.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
