/**
 * Scans in the PostgreSQL store (any number of instances): a daily count is one upsert on its row (the
 * row lock orders every instance's scans), a chunk is taken with FOR UPDATE SKIP LOCKED (instances never
 * wait on each other's chunks), and a chunk's items, counts and completion are one transaction that
 * first checks the lease is still held.
 */
import type pg from 'pg';
import type { PgConnection } from '../../store/postgres/connection.js';
import { addToCounts, emptyCounts } from '../analyse.js';
import type * as jobs from './store.js';
import { SERVICE_SCOPE, accountScope, dayOf, emptyStateCounts, scanOf } from './store.js';

/** jsonb columns come parsed. */
const same = (v: unknown): unknown => v;

const COUNT = `INSERT INTO scan_days (scope, day, started) VALUES ($1, $2, 1)
  ON CONFLICT (scope, day) DO UPDATE SET started = scan_days.started + 1 WHERE scan_days.started < $3 RETURNING started`;

/** One more for the scope's day while below `limit` (one statement: the row lock orders the instances). */
async function counted(c: pg.PoolClient, scope: string, day: string, limit: number): Promise<boolean> {
  return limit > 0 && (await c.query(COUNT, [scope, day, limit])).rowCount! > 0;
}

const ADD_CHUNK = 'INSERT INTO scan_chunks (scan_id, k) VALUES ($1, $2) ON CONFLICT DO NOTHING';

export class PgScanStore implements jobs.ScanJobStore {
  readonly #conn: PgConnection;

  constructor(conn: PgConnection) {
    this.#conn = conn;
  }

  async create(s: jobs.NewScan, limits: jobs.DailyLimits): Promise<jobs.CreateResult> {
    return this.#conn.tx(async (c) => {
      const day = dayOf(s.now);
      if (!(await counted(c, accountScope(s.accountId), day, limits.account))) return { ok: false };
      const state: jobs.ScanState = (await counted(c, SERVICE_SCOPE, day, limits.service)) ? 'queued' : 'paused';
      const r = await c.query<jobs.ScanColumns<unknown>>(
        'INSERT INTO scans (id, account_id, source, options, state, created_at, counts) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *',
        [s.id, s.accountId, s.source, JSON.stringify(s.options), state, s.now, JSON.stringify(emptyCounts())],
      );
      if (state === 'queued') await c.query(ADD_CHUNK, [s.id, 0]);
      return { ok: true, scan: scanOf(r.rows[0]!, same) };
    });
  }

  async get(accountId: number, id: string): Promise<jobs.ScanRow | undefined> {
    const r = await this.#conn.q<jobs.ScanColumns<unknown>>('SELECT * FROM scans WHERE id = $1 AND account_id = $2', [id, accountId]);
    return r.rows[0] ? scanOf(r.rows[0], same) : undefined;
  }

  async list(accountId: number, after: { createdAt: number; id: string } | undefined, limit: number): Promise<jobs.ScanRow[]> {
    const r = after
      ? await this.#conn.q<jobs.ScanColumns<unknown>>(
          'SELECT * FROM scans WHERE account_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4',
          [accountId, after.createdAt, after.id, limit],
        )
      : await this.#conn.q<jobs.ScanColumns<unknown>>('SELECT * FROM scans WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2', [
          accountId,
          limit,
        ]);
    return r.rows.map((row) => scanOf(row, same));
  }

  async items(scanId: string, from: number, limit: number): Promise<jobs.IndexedItem[]> {
    const r = await this.#conn.q<{ idx: number; item: jobs.IndexedItem['item'] }>(
      'SELECT idx, item FROM scan_items WHERE scan_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3',
      [scanId, from, limit],
    );
    return r.rows.map((row) => ({ index: row.idx, item: row.item }));
  }

  async cancel(accountId: number, id: string, now: number): Promise<jobs.ScanRow | undefined> {
    await this.#conn.q(
      "UPDATE scans SET state = 'cancelled', finished_at = $1 WHERE id = $2 AND account_id = $3 AND state IN ('queued', 'paused', 'running')",
      [now, id, accountId],
    );
    return this.get(accountId, id);
  }

  async stateOf(id: string): Promise<jobs.ScanState | undefined> {
    return (await this.#conn.q<{ state: jobs.ScanState }>('SELECT state FROM scans WHERE id = $1', [id])).rows[0]?.state;
  }

  async resumePaused(now: number, serviceLimit: number): Promise<number> {
    let started = 0;
    for (;;) {
      const one = await this.#conn.tx(async (c) => {
        const next = await c.query<{ id: string }>("SELECT id FROM scans WHERE state = 'paused' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED");
        const id = next.rows[0]?.id;
        if (id === undefined || !(await counted(c, SERVICE_SCOPE, dayOf(now), serviceLimit))) return false;
        await c.query("UPDATE scans SET state = 'queued' WHERE id = $1", [id]);
        await c.query(ADD_CHUNK, [id, 0]);
        return true;
      });
      if (!one) return started;
      started++;
    }
  }

  async claim(owner: string, now: number, leaseMs: number): Promise<jobs.ClaimedChunk | undefined> {
    return this.#conn.tx(async (c) => {
      const chunk = await c.query<{ scan_id: string; k: number }>(
        `SELECT c.scan_id, c.k FROM scan_chunks c JOIN scans s ON s.id = c.scan_id
          WHERE NOT c.done AND c.lease_until < $1 AND s.state IN ('queued', 'running')
          ORDER BY s.created_at, c.k LIMIT 1 FOR UPDATE OF c SKIP LOCKED`,
        [now],
      );
      const got = chunk.rows[0];
      if (!got) return undefined;
      await c.query('UPDATE scan_chunks SET lease_owner = $1, lease_until = $2 WHERE scan_id = $3 AND k = $4', [owner, now + leaseMs, got.scan_id, got.k]);
      const s = await c.query<jobs.ScanColumns<unknown>>(
        "UPDATE scans SET state = 'running', started_at = coalesce(started_at, $1) WHERE id = $2 RETURNING *",
        [now, got.scan_id],
      );
      return { scan: scanOf(s.rows[0]!, same), k: got.k };
    });
  }

  async renew(owner: string, scanId: string, k: number, now: number, leaseMs: number): Promise<boolean> {
    const r = await this.#conn.q('UPDATE scan_chunks SET lease_until = $1 WHERE scan_id = $2 AND k = $3 AND lease_owner = $4 AND NOT done', [
      now + leaseMs,
      scanId,
      k,
      owner,
    ]);
    return (r.rowCount ?? 0) > 0;
  }

  async addChunk(scanId: string, k: number): Promise<void> {
    await this.#conn.q(ADD_CHUNK, [scanId, k]);
  }

  async complete(owner: string, scanId: string, k: number, items: jobs.IndexedItem[], now: number, end?: jobs.ChunkEnd): Promise<boolean> {
    return this.#conn.tx(async (c) => {
      const held = await c.query('SELECT 1 FROM scan_chunks WHERE scan_id = $1 AND k = $2 AND lease_owner = $3 AND NOT done FOR UPDATE', [scanId, k, owner]);
      if (held.rowCount === 0) return false;
      const scan = await c.query<{ counts: jobs.ScanRow['counts'] }>('SELECT counts FROM scans WHERE id = $1 FOR UPDATE', [scanId]);
      if (!scan.rows[0]) return false;
      const counts = scan.rows[0].counts;
      const written = await c.query<{ idx: number }>(
        'INSERT INTO scan_items (scan_id, idx, item) SELECT $1, i, t::jsonb FROM unnest($2::int[], $3::text[]) AS u(i, t) ON CONFLICT DO NOTHING RETURNING idx',
        [scanId, items.map((i) => i.index), items.map((i) => JSON.stringify(i.item))],
      );
      const fresh = new Set(written.rows.map((r) => r.idx));
      for (const { index, item } of items) if (fresh.has(index)) addToCounts(counts, item);
      await c.query('UPDATE scans SET counts = $1, progress = progress + $2 WHERE id = $3', [JSON.stringify(counts), fresh.size, scanId]);
      await c.query('UPDATE scan_chunks SET done = true WHERE scan_id = $1 AND k = $2', [scanId, k]);
      if (end) {
        await c.query("UPDATE scans SET state = 'failed', error = $1, finished_at = $2 WHERE id = $3 AND state = 'running'", [
          JSON.stringify(end.error),
          now,
          scanId,
        ]);
        await c.query('UPDATE scan_chunks SET done = true WHERE scan_id = $1', [scanId]);
      } else {
        await c.query(
          "UPDATE scans SET state = 'done', finished_at = $1 WHERE id = $2 AND state = 'running' AND NOT EXISTS (SELECT 1 FROM scan_chunks WHERE scan_id = $2 AND NOT done)",
          [now, scanId],
        );
      }
      return true;
    });
  }

  async stateCounts(): Promise<Record<jobs.ScanState, number>> {
    const out = emptyStateCounts();
    const r = await this.#conn.q<{ state: jobs.ScanState; n: number }>('SELECT state, count(*)::int AS n FROM scans GROUP BY state');
    for (const row of r.rows) out[row.state] = row.n;
    return out;
  }
}
