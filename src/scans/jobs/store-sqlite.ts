/**
 * Scans in the SQLite store (one machine): every read-modify-write is one IMMEDIATE transaction, so the
 * daily counts and a chunk's items stay exact against any other connection to the file.
 */
import type { Db } from '../../store/db.js';
import { addToCounts, emptyCounts } from '../analyse.js';
import type * as jobs from './store.js';
import { SERVICE_SCOPE, accountScope, dayOf, emptyStateCounts, scanOf } from './store.js';

export class SqliteScanStore implements jobs.ScanJobStore {
  readonly #db: Db;
  readonly #create;
  readonly #resume;
  readonly #claim;
  readonly #complete;

  constructor(db: Db) {
    this.#db = db;
    const count = db.prepare<[string, string, number]>(
      `INSERT INTO scan_days (scope, day, started) VALUES (?, ?, 1)
       ON CONFLICT (scope, day) DO UPDATE SET started = started + 1 WHERE started < ? RETURNING started`,
    );
    /** One more for the scope's day while below `limit`: false past it. */
    const counted = (scope: string, day: string, limit: number): boolean => limit > 0 && count.all(scope, day, limit).length > 0;
    const insertScan = db.prepare(
      `INSERT INTO scans (id, account_id, source, options, state, created_at, counts) VALUES (@id, @account, @source, @options, @state, @now, @counts)`,
    );
    const insertChunk = db.prepare<[string, number]>('INSERT INTO scan_chunks (scan_id, k) VALUES (?, ?) ON CONFLICT DO NOTHING');
    const byId = db.prepare<[string], jobs.ScanColumns<string>>('SELECT * FROM scans WHERE id = ?');
    this.#create = db.transaction((s: jobs.NewScan, limits: jobs.DailyLimits): jobs.CreateResult => {
      const day = dayOf(s.now);
      if (!counted(accountScope(s.accountId), day, limits.account)) return { ok: false };
      const state: jobs.ScanState = counted(SERVICE_SCOPE, day, limits.service) ? 'queued' : 'paused';
      insertScan.run({
        id: s.id,
        account: s.accountId,
        source: s.source,
        options: JSON.stringify(s.options),
        state,
        now: s.now,
        counts: JSON.stringify(emptyCounts()),
      });
      if (state === 'queued') insertChunk.run(s.id, 0);
      return { ok: true, scan: scanOf(byId.get(s.id)!, JSON.parse) };
    });
    const oldestPaused = db.prepare<[], { id: string }>("SELECT id FROM scans WHERE state = 'paused' ORDER BY created_at, id LIMIT 1");
    const unpause = db.prepare<[string]>("UPDATE scans SET state = 'queued' WHERE id = ?");
    this.#resume = db.transaction((now: number, limit: number): number => {
      let started = 0;
      for (;;) {
        const next = oldestPaused.get();
        if (!next || !counted(SERVICE_SCOPE, dayOf(now), limit)) return started;
        unpause.run(next.id);
        insertChunk.run(next.id, 0);
        started++;
      }
    });
    const free = db.prepare<[number], { scan_id: string; k: number }>(
      `SELECT c.scan_id, c.k FROM scan_chunks c JOIN scans s ON s.id = c.scan_id
        WHERE c.done = 0 AND c.lease_until < ? AND s.state IN ('queued', 'running') ORDER BY s.created_at, c.k LIMIT 1`,
    );
    const lease = db.prepare<[string, number, string, number]>('UPDATE scan_chunks SET lease_owner = ?, lease_until = ? WHERE scan_id = ? AND k = ?');
    const start = db.prepare<[number, string]>("UPDATE scans SET state = 'running', started_at = coalesce(started_at, ?) WHERE id = ?");
    this.#claim = db.transaction((owner: string, now: number, leaseMs: number): jobs.ClaimedChunk | undefined => {
      const c = free.get(now);
      if (!c) return undefined;
      lease.run(owner, now + leaseMs, c.scan_id, c.k);
      start.run(now, c.scan_id);
      return { scan: scanOf(byId.get(c.scan_id)!, JSON.parse), k: c.k };
    });
    const held = db.prepare<[string, number, string]>('SELECT 1 FROM scan_chunks WHERE scan_id = ? AND k = ? AND lease_owner = ? AND done = 0');
    const insertItem = db.prepare<[string, number, string]>('INSERT INTO scan_items (scan_id, idx, item) VALUES (?, ?, ?) ON CONFLICT DO NOTHING');
    const setCounts = db.prepare<[string, number, string]>('UPDATE scans SET counts = ?, progress = progress + ? WHERE id = ?');
    const chunkDone = db.prepare<[string, number]>('UPDATE scan_chunks SET done = 1 WHERE scan_id = ? AND k = ?');
    const fail = db.prepare<[string, number, string]>("UPDATE scans SET state = 'failed', error = ?, finished_at = ? WHERE id = ? AND state = 'running'");
    const closeChunks = db.prepare<[string]>('UPDATE scan_chunks SET done = 1 WHERE scan_id = ?');
    const finish = db.prepare<[number, string, string]>(
      "UPDATE scans SET state = 'done', finished_at = ? WHERE id = ? AND state = 'running' AND NOT EXISTS (SELECT 1 FROM scan_chunks WHERE scan_id = ? AND done = 0)",
    );
    this.#complete = db.transaction((owner: string, scanId: string, k: number, items: jobs.IndexedItem[], now: number, end?: jobs.ChunkEnd): boolean => {
      if (!held.get(scanId, k, owner)) return false;
      const row = byId.get(scanId);
      if (!row) return false;
      const counts = JSON.parse(row.counts);
      let added = 0;
      for (const { index, item } of items) {
        if (insertItem.run(scanId, index, JSON.stringify(item)).changes === 0) continue;
        addToCounts(counts, item);
        added++;
      }
      setCounts.run(JSON.stringify(counts), added, scanId);
      chunkDone.run(scanId, k);
      if (end) {
        fail.run(JSON.stringify(end.error), now, scanId);
        closeChunks.run(scanId);
      } else finish.run(now, scanId, scanId);
      return true;
    });
  }

  async create(scan: jobs.NewScan, limits: jobs.DailyLimits): Promise<jobs.CreateResult> {
    return this.#create.immediate(scan, limits);
  }

  async get(accountId: number, id: string): Promise<jobs.ScanRow | undefined> {
    const r = this.#db.prepare<[string, number], jobs.ScanColumns<string>>('SELECT * FROM scans WHERE id = ? AND account_id = ?').get(id, accountId);
    return r ? scanOf(r, JSON.parse) : undefined;
  }

  async list(accountId: number, after: { createdAt: number; id: string } | undefined, limit: number): Promise<jobs.ScanRow[]> {
    const rows = after
      ? this.#db
          .prepare<[number, number, number, string, number], jobs.ScanColumns<string>>(
            'SELECT * FROM scans WHERE account_id = ? AND (created_at < ? OR (created_at = ? AND id < ?)) ORDER BY created_at DESC, id DESC LIMIT ?',
          )
          .all(accountId, after.createdAt, after.createdAt, after.id, limit)
      : this.#db
          .prepare<[number, number], jobs.ScanColumns<string>>('SELECT * FROM scans WHERE account_id = ? ORDER BY created_at DESC, id DESC LIMIT ?')
          .all(accountId, limit);
    return rows.map((r) => scanOf(r, JSON.parse));
  }

  async items(scanId: string, from: number, limit: number): Promise<jobs.IndexedItem[]> {
    return this.#db
      .prepare<[string, number, number], { idx: number; item: string }>('SELECT idx, item FROM scan_items WHERE scan_id = ? AND idx >= ? ORDER BY idx LIMIT ?')
      .all(scanId, from, limit)
      .map((r) => ({ index: r.idx, item: JSON.parse(r.item) }));
  }

  async cancel(accountId: number, id: string, now: number): Promise<jobs.ScanRow | undefined> {
    this.#db
      .prepare<[number, string, number]>(
        "UPDATE scans SET state = 'cancelled', finished_at = ? WHERE id = ? AND account_id = ? AND state IN ('queued', 'paused', 'running')",
      )
      .run(now, id, accountId);
    return this.get(accountId, id);
  }

  async stateOf(id: string): Promise<jobs.ScanState | undefined> {
    return this.#db.prepare<[string], { state: jobs.ScanState }>('SELECT state FROM scans WHERE id = ?').get(id)?.state;
  }

  async resumePaused(now: number, serviceLimit: number): Promise<number> {
    return this.#resume.immediate(now, serviceLimit);
  }

  async claim(owner: string, now: number, leaseMs: number): Promise<jobs.ClaimedChunk | undefined> {
    return this.#claim.immediate(owner, now, leaseMs);
  }

  async renew(owner: string, scanId: string, k: number, now: number, leaseMs: number): Promise<boolean> {
    return (
      this.#db
        .prepare<[number, string, number, string]>('UPDATE scan_chunks SET lease_until = ? WHERE scan_id = ? AND k = ? AND lease_owner = ? AND done = 0')
        .run(now + leaseMs, scanId, k, owner).changes > 0
    );
  }

  async addChunk(scanId: string, k: number): Promise<void> {
    this.#db.prepare<[string, number]>('INSERT INTO scan_chunks (scan_id, k) VALUES (?, ?) ON CONFLICT DO NOTHING').run(scanId, k);
  }

  async complete(owner: string, scanId: string, k: number, items: jobs.IndexedItem[], now: number, end?: jobs.ChunkEnd): Promise<boolean> {
    return this.#complete.immediate(owner, scanId, k, items, now, end);
  }

  async stateCounts(): Promise<Record<jobs.ScanState, number>> {
    const out = emptyStateCounts();
    for (const r of this.#db.prepare<[], { state: jobs.ScanState; n: number }>('SELECT state, count(*) AS n FROM scans GROUP BY state').all())
      out[r.state] = r.n;
    return out;
  }
}
