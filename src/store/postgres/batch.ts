/**
 * Reserves, commits and refunds of concurrent requests, gathered into one statement per kind (one round
 * trip and one wakeup of a PostgreSQL backend for N protects instead of N; each such wakeup is a process
 * switch on the cores the instance runs on, and under load a wait in the run queue).
 *
 * - Gathering: a request's call joins its kind's queue; the queue is sent at the end of the event-loop
 *   turn, one statement at a time per kind. What arrives while one is on its way goes in the next, so a
 *   batch grows with the load and a lone request waits for no one. A turn of one reserve or commit uses the
 *   engine's single-row statement instead (these cost PostgreSQL about three times as much to run).
 * - Exact, as if alone and in arrival order: the calls are grouped per counter (account, month,
 *   operation). The statement locks the groups' counter rows first, in key order (`SELECT ... ORDER BY ...
 *   FOR UPDATE`: the latest committed version of each row, as `UPDATE ... WHERE used < limit` would see
 *   it), then writes from the locked values: a group of k asks for min(k, limit - used) units, and the
 *   first of them in arrival order get them, each with the counter it would have seen alone. So no
 *   number of batches on any number of instances takes more than the limit.
 * - Lock order: every statement here locks counter rows before hold rows, each in key order (the scalar
 *   subquery over the locked rows is an InitPlan: it runs before any write). Two of these statements can
 *   not wait on each other in a circle; a deadlock with another statement (a reconciliation giving a dead
 *   instance's units back locks its counters in its own order) rolls the whole statement back, and it
 *   is sent again.
 * - Failure: one error fails every call of the batch with it (store_unavailable for want of the
 *   database; the API answers 503 with Retry-After and no unit is granted without its row written).
 */
import type pg from 'pg';
import type { Operation } from '../quota.js';

/** Calls per statement at most; more wait for the next. */
export const MAX_BATCH = 256;
/** A statement rolled back by a deadlock is sent again this many times. */
const DEADLOCK_RETRIES = 3;

/** The effective limit of row `x` (with `operation` and the account `a` joined), $2/$3 the defaults. */
const LIMIT = `coalesce(CASE x.operation WHEN 'protect' THEN a.protect_limit ELSE a.verify_limit END, CASE x.operation WHEN 'protect' THEN $2::bigint ELSE $3::bigint END)`;

/**
 * One row per counter group: $4..$7 account ids, months, operations and how many calls ask a unit.
 * `before` is the locked counter (null: no row yet); a group without a row gets one inserted with its
 * units (`won`), unless another instance inserted it in the same instant: that group is sent again.
 */
export const RESERVE_BATCH = `
  WITH x AS (
    SELECT * FROM unnest($4::int[], $5::text[], $6::text[], $7::int[]) WITH ORDINALITY AS x(account_id, month, operation, k, i)
  ),
  l AS (SELECT x.*, ${LIMIT} AS lim FROM x JOIN accounts a ON a.id = x.account_id),
  y AS (
    SELECT u.account_id, u.month, u.operation, u.used FROM usage_counters u JOIN l USING (account_id, month, operation)
     ORDER BY u.account_id, u.month, u.operation FOR UPDATE OF u
  ),
  g AS (
    SELECT l.*, y.used AS before,
           CASE WHEN y.used IS NULL THEN least(l.k, greatest(l.lim, 0)) ELSE least(l.k, greatest(l.lim - y.used, 0)) END AS granted
      FROM l LEFT JOIN y USING (account_id, month, operation) WHERE (SELECT count(*) FROM y) >= 0
  ),
  c AS (
    UPDATE usage_counters u SET used = g.before + g.granted FROM g
     WHERE g.before IS NOT NULL AND g.granted > 0 AND u.account_id = g.account_id AND u.month = g.month AND u.operation = g.operation
    RETURNING u.account_id
  ),
  n AS (
    INSERT INTO usage_counters (account_id, month, operation, used)
      SELECT account_id, month, operation, granted FROM g WHERE before IS NULL AND granted > 0 ORDER BY account_id, month, operation
    ON CONFLICT DO NOTHING
    RETURNING account_id, month, operation
  ),
  w AS (
    SELECT g.* FROM g WHERE g.before IS NOT NULL AND g.granted > 0
    UNION ALL
    SELECT g.* FROM g JOIN n USING (account_id, month, operation)
  ),
  h AS (
    INSERT INTO holds AS h (owner, account_id, month, operation, n)
      SELECT $1::text, account_id, month, operation, granted FROM w ORDER BY account_id, month, operation
    ON CONFLICT (owner, account_id, month, operation) DO UPDATE SET n = h.n + excluded.n
    RETURNING 1
  )
  SELECT x.i, l.lim, g.before, g.granted, (g.before IS NOT NULL OR n.account_id IS NOT NULL) AS won
    FROM x LEFT JOIN l USING (i) LEFT JOIN g USING (i) LEFT JOIN n ON n.account_id = g.account_id AND n.month = g.month AND n.operation = g.operation
   ORDER BY x.i`;

/**
 * One row per group: $4..$8 account ids, months the units were taken from, operations, the months whose
 * counter the answer shows, and how many calls commit. The first min(k, held) are taken off this
 * instance's hold (the units stay counted); the others' holds were reclaimed.
 */
export const COMMIT_BATCH = `
  WITH x AS (
    SELECT * FROM unnest($4::int[], $5::text[], $6::text[], $7::text[], $8::int[]) WITH ORDINALITY AS x(account_id, month, operation, at, k, i)
  ),
  y AS (
    SELECT h.account_id, h.month, h.operation, h.n FROM holds h JOIN x USING (account_id, month, operation)
     WHERE h.owner = $1::text ORDER BY h.account_id, h.month, h.operation FOR UPDATE OF h
  ),
  g AS (
    SELECT x.*, y.n AS before, least(x.k, coalesce(y.n, 0)) AS released
      FROM x LEFT JOIN y USING (account_id, month, operation) WHERE (SELECT count(*) FROM y) >= 0
  ),
  d AS (
    UPDATE holds h SET n = g.before - g.released FROM g
     WHERE g.released > 0 AND h.owner = $1::text AND h.account_id = g.account_id AND h.month = g.month AND h.operation = g.operation
    RETURNING 1
  )
  SELECT g.i, g.released, ${LIMIT} AS lim,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = g.account_id AND u.month = g.at AND u.operation = g.operation), 0) AS used
    FROM g JOIN x USING (i) LEFT JOIN accounts a ON a.id = g.account_id ORDER BY g.i`;

/**
 * One row per group: $4..$9 account ids, months the units were taken from, operations, the months whose
 * counter the answer shows, how many calls give back a held unit and how many a committed one. A held
 * unit goes off the hold, and off the counter only if the hold had it; a committed one off the counter
 * only; the counter never below 0. Answers the locked values before: the caller replays the calls.
 */
export const REFUND_BATCH = `
  WITH x AS (
    SELECT * FROM unnest($4::int[], $5::text[], $6::text[], $7::text[], $8::int[], $9::int[])
      WITH ORDINALITY AS x(account_id, month, operation, at, held, committed, i)
  ),
  yc AS (
    SELECT u.account_id, u.month, u.operation, u.used FROM usage_counters u JOIN x USING (account_id, month, operation)
     ORDER BY u.account_id, u.month, u.operation FOR UPDATE OF u
  ),
  yh AS (
    SELECT h.account_id, h.month, h.operation, h.n FROM holds h JOIN x USING (account_id, month, operation)
     WHERE h.owner = $1::text AND (SELECT count(*) FROM yc) >= 0 ORDER BY h.account_id, h.month, h.operation FOR UPDATE OF h
  ),
  g AS (
    SELECT x.*, yc.used AS used_before, yh.n AS held_before, least(x.held, coalesce(yh.n, 0)) AS dh
      FROM x LEFT JOIN yc USING (account_id, month, operation) LEFT JOIN yh USING (account_id, month, operation)
     WHERE (SELECT count(*) FROM yh) >= 0
  ),
  dh AS (
    UPDATE holds h SET n = g.held_before - g.dh FROM g
     WHERE g.dh > 0 AND h.owner = $1::text AND h.account_id = g.account_id AND h.month = g.month AND h.operation = g.operation
    RETURNING 1
  ),
  dc AS (
    UPDATE usage_counters u SET used = g.used_before - least(g.committed + g.dh, g.used_before) FROM g
     WHERE least(g.committed + g.dh, g.used_before) > 0 AND u.account_id = g.account_id AND u.month = g.month AND u.operation = g.operation
    RETURNING 1
  )
  SELECT g.i, g.held_before, g.used_before, ${LIMIT} AS lim,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = g.account_id AND u.month = g.at AND u.operation = g.operation), 0) AS used_at
    FROM g JOIN x USING (i) LEFT JOIN accounts a ON a.id = g.account_id ORDER BY g.i`;

export interface Group<M> {
  accountId: number;
  month: string;
  operation: Operation;
  /** The month whose counter the answers show (commit and refund). */
  at: string;
  members: M[];
}

/**
 * The calls of one batch by counter, in key order; calls of a counter keep their arrival order. A call
 * whose answer shows another month than its group's (the month turned between two calls) is `later`.
 */
export function groupsOf<M extends { accountId: number; month: string; operation: Operation; at: string }>(
  members: readonly M[],
): { groups: Group<M>[]; later: Set<M> } {
  const byKey = new Map<string, Group<M>>();
  const later = new Set<M>();
  for (const m of members) {
    const key = `${m.accountId}\u0000${m.month}\u0000${m.operation}`;
    let g = byKey.get(key);
    if (!g) byKey.set(key, (g = { accountId: m.accountId, month: m.month, operation: m.operation, at: m.at, members: [] }));
    if (g.at === m.at) g.members.push(m);
    else later.add(m);
  }
  const groups = [...byKey.values()].sort((a, b) => a.accountId - b.accountId || cmp(a.month, b.month) || cmp(a.operation, b.operation));
  return { groups, later };
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The arrays of a batch statement's groups ($4 onwards). */
export function groupArrays<M>(groups: readonly Group<M>[], ...columns: ((g: Group<M>) => number | string)[]): unknown[] {
  return [groups.map((g) => g.accountId), groups.map((g) => g.month), groups.map((g) => g.operation), ...columns.map((c) => groups.map(c))];
}

/** Does `err` say PostgreSQL rolled the statement back to break a deadlock? */
export const isDeadlock = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === '40P01';

export { DEADLOCK_RETRIES };

interface Pending<M, R> {
  member: M;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

/**
 * A queue of calls sent `run` together: at the end of the turn they arrived in, one `run` at a time.
 * `run` answers each call (a result or an Error to throw), or throws for all. A call `run` cannot place
 * in this batch (`defer`) goes in the next.
 */
export class Batcher<M, R> {
  readonly #run: (members: M[]) => Promise<(R | Error | typeof DEFER)[]>;
  #queue: Pending<M, R>[] = [];
  #busy = false;
  #scheduled = false;

  constructor(run: (members: M[]) => Promise<(R | Error | typeof DEFER)[]>) {
    this.#run = run;
  }

  add(member: M): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ member, resolve, reject });
      this.#kick();
    });
  }

  /** Calls waiting or on their way. */
  get size(): number {
    return this.#queue.length;
  }

  #kick(): void {
    if (this.#busy || this.#scheduled || this.#queue.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    if (this.#busy || this.#queue.length === 0) return;
    this.#busy = true;
    const batch = this.#queue.splice(0, MAX_BATCH);
    try {
      const out = await this.#run(batch.map((p) => p.member));
      const again: Pending<M, R>[] = [];
      batch.forEach((p, i) => {
        const r = out[i];
        if (r === DEFER) again.push(p);
        else if (r instanceof Error) p.reject(r);
        else p.resolve(r as R);
      });
      this.#queue.unshift(...again);
    } catch (err) {
      for (const p of batch) p.reject(err);
    } finally {
      this.#busy = false;
      this.#kick();
    }
  }
}

/** A call that goes in the next batch (a counter row another instance created in the same instant). */
export const DEFER: unique symbol = Symbol('defer');

/** Runs one batch statement on a connection of its own; `onWritten` runs once it is on the socket. */
export async function runOn<R extends pg.QueryResultRow>(
  client: pg.PoolClient,
  query: { name: string; text: string; values: unknown[] },
  onWritten?: () => void,
): Promise<R[]> {
  for (let attempt = 0; ; attempt++) {
    const pending = client.query<R>(query);
    if (attempt === 0) onWritten?.();
    try {
      return (await pending).rows;
    } catch (err) {
      if (!isDeadlock(err) || attempt >= DEADLOCK_RETRIES) throw err;
    }
  }
}
