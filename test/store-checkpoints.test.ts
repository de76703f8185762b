// WAL checkpoints on a thread of their own (src/store/checkpoints.ts), as the server runs them: the
// counters reach the database file without the connection checkpointing, the WAL rewinds when writes
// pause, and without the thread the connection checkpoints itself again.
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { SqliteStore } from '../src/store/index.js';
import { ROOT, requireBuild, waitFor } from './helpers/server.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function openStore(): Promise<{ store: SqliteStore; dir: string; account: number }> {
  requireBuild(); // the checkpointer is a worker thread: it runs from the build
  const { SqliteStore: BuiltStore } = (await import(
    pathToFileURL(join(ROOT, 'dist', 'src', 'store', 'index.js')).href
  )) as typeof import('../src/store/index.js');
  const dir = mkdtempSync(join(tmpdir(), 'optmark-ckpt-'));
  dirs.push(dir);
  const store = BuiltStore.openSync({ dataDir: dir, defaultProtectLimit: 1_000_000, defaultVerifyLimit: 1_000_000 });
  const account = (await store.createAccount('acme', 'pro')).id;
  // The schema into the database file, so that the file alone can be read.
  const db = new Database(join(dir, 'optmark.db'));
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return { store, dir, account };
}

/** The protect counter as the database file alone holds it, without the WAL: what checkpoints copied. */
function counterInFile(dir: string): number {
  const copy = join(dir, 'file-only.db');
  copyFileSync(join(dir, 'optmark.db'), copy);
  const db = new Database(copy, { readonly: true });
  try {
    return (db.prepare("SELECT coalesce(sum(used), 0) AS n FROM usage_counters WHERE operation = 'protect'").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

function reserve(store: SqliteStore, account: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const r = store.reserveSync(account, 'protect');
    if (!r.ok) throw new Error('over the limit');
    store.commitSync(r.reservation);
  }
}

describe('background checkpoints', () => {
  it('copy the counters into the database file, and the WAL rewinds once writes pause', async () => {
    const { store, dir, account } = await openStore();
    store.startBackgroundCheckpoints({ intervalMs: 50 });
    try {
      // 1500 commits: past SQLite's default of 1000 pages, below the connection's own bound.
      reserve(store, account, 1500);
      // Reports of checkpoints that ran during the (synchronous) writes may still be queued when they
      // end, so wait for what the checkpoints do rather than for a count of them.
      // The file can show the counters before the thread's report of that checkpoint arrives: wait for both.
      await waitFor('the counters in the database file, and a report of the checkpoint that copied them', () =>
        counterInFile(dir) === 1500 && store.checkpointStats!.runs > 0 ? true : undefined,
      );
      expect(store.checkpointStats!.runs).toBeGreaterThan(0);
      // Every frame was copied while nothing was written: the next commit starts the WAL over.
      reserve(store, account, 1);
      // Reports of checkpoints that ran before may still be queued: wait for what a checkpoint of the
      // rewound WAL shows, not for a count of reports.
      await waitFor('a checkpoint of the rewound WAL', () => (store.checkpointStats!.walFrames < 10 ? true : undefined));
      await waitFor('the last counter in the database file', () => (counterInFile(dir) === 1501 ? true : undefined));
      expect(store.checkpointStats!.running).toBe(true);
    } finally {
      await store.stopBackgroundCheckpoints();
      store.closeSync();
    }
  });

  it("under writes that never pause, the connection's own bound rewinds the WAL at 16384 pages", async () => {
    const { store, dir, account } = await openStore();
    store.startBackgroundCheckpoints({ intervalMs: 60_000 });
    try {
      // A request writes three WAL frames (the counter and the hold at reserve, the hold at commit).
      reserve(store, account, 8000);
      const wal = readFileSync(join(dir, 'optmark.db-wal'));
      expect(wal.readUInt32BE(12)).toBeGreaterThanOrEqual(1); // rewound
      expect(wal.length).toBeLessThanOrEqual(32 + 16_500 * (wal.readUInt32BE(8) + 24));
    } finally {
      await store.stopBackgroundCheckpoints();
      store.closeSync();
    }
  });

  it('a failed checkpointer is reported once and the connection checkpoints itself again', async () => {
    const { store, dir, account } = await openStore();
    const file = join(dir, 'optmark.db');
    renameSync(file, `${file}.away`); // the thread cannot open the file; this connection keeps its own
    const errors: Error[] = [];
    store.startBackgroundCheckpoints({ intervalMs: 50, onError: (err) => errors.push(err) });
    try {
      await waitFor('the checkpointer to fail', () => (store.checkpointStats!.running ? undefined : true));
      renameSync(`${file}.away`, file);
      expect(errors).toHaveLength(1);
      expect(store.checkpointStats!.failures).toBe(1);
      reserve(store, account, 1);
      const rewinds = readFileSync(join(dir, 'optmark.db-wal')).readUInt32BE(12);
      reserve(store, account, 1200); // past 1000 pages: checkpointed and rewound by this connection
      expect(readFileSync(join(dir, 'optmark.db-wal')).readUInt32BE(12)).toBeGreaterThan(rewinds);
      await store.stopBackgroundCheckpoints(); // nothing left to stop: returns
    } finally {
      store.closeSync();
    }
    expect(counterInFile(dir)).toBe(1201);
  });

  it('stopped, leave the connection checkpointing itself every 1000 pages, as SQLite does by default', async () => {
    const { store, dir, account } = await openStore();
    store.startBackgroundCheckpoints({ intervalMs: 60_000 });
    try {
      // The thread has not run yet, and the connection leaves checkpoints to it.
      reserve(store, account, 1200);
      expect(counterInFile(dir)).toBe(0);
      await store.stopBackgroundCheckpoints();
      expect(store.checkpointStats!.running).toBe(false);
      reserve(store, account, 1200);
      const inFile = counterInFile(dir);
      expect(inFile).toBeGreaterThan(1200);
      expect(inFile).toBeLessThanOrEqual(2400);
      // Closing the last connection checkpoints the rest.
    } finally {
      store.closeSync();
    }
    expect(counterInFile(dir)).toBe(2400);
  });
});
