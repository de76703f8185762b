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
 * - Lock order: every statement here locks counter rows before hold rows (a hold row is one reservation's,
 *   touched only by its own commit or refund and by a release of its owner), counters in key order (the scalar
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
 * One row per counter group: $4..$7 account ids, months, operations and how many calls ask a unit; $8..$10
 * per call its hold id, its group (1-based) and its place in the group (1-based). `before` is the locked
 * counter (null: no row yet); a group without a row gets one inserted with its units (`won`), unless
 * another instance inserted it in the same instant: that group is sent again. The first `granted` calls
 * of a group get their hold row.
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
    INSERT INTO reservations (owner, id, account_id, month, operation)
      SELECT $1::text, m.id, w.account_id, w.month, w.operation
        FROM unnest($8::bigint[], $9::int[], $10::int[]) AS m(id, grp, rank) JOIN w ON w.i = m.grp WHERE m.rank <= w.granted
    RETURNING 1
  )
  SELECT x.i, l.lim, g.before, g.granted, (g.before IS NOT NULL OR n.account_id IS NOT NULL) AS won
    FROM x LEFT JOIN l USING (i) LEFT JOIN g USING (i) LEFT JOIN n ON n.account_id = g.account_id AND n.month = g.month AND n.operation = g.operation
   ORDER BY x.i`;

/**
 * One row per group: $4..$7 account ids, months the units were taken from, operations, and the months
 * whose counter the answer shows; $8 the hold ids of the calls. `released`: the ids whose hold row was
 * still there and is now gone (the units stay counted); the others' holds were reclaimed, or already
 * committed by an earlier sending of the same statement.
 */
export const COMMIT_BATCH = `
  WITH x AS (
    SELECT * FROM unnest($4::int[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS x(account_id, month, operation, at, i)
  ),
  d AS (
    DELETE FROM reservations r USING unnest($8::bigint[]) AS m(id) WHERE r.owner = $1::text AND r.id = m.id AND NOT r.refunded RETURNING r.id
  )
  SELECT x.i, ${LIMIT} AS lim, ARRAY(SELECT id FROM d) AS released,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = x.account_id AND u.month = x.at AND u.operation = x.operation), 0) AS used
    FROM x LEFT JOIN accounts a ON a.id = x.account_id ORDER BY x.i`;

/**
 * One row per group: $4..$7 account ids, months the units were taken from, operations, the months whose
 * counter the answer shows; $8..$10 per call its hold id, its group (1-based) and whether its unit is
 * still held. A held unit's row goes, and the unit off the counter only if the row was there (else a
 * reconciliation or an earlier sending of this refund gave it back). A committed unit's row is marked
 * refunded (inserted: its commit took it; or still held: its commit never ran), and the unit off the
 * counter only if it was not marked already. The counter never below 0. `applied`: the calls that took a
 * unit off; `used_before` the locked counter: the caller replays the calls.
 */
export const REFUND_BATCH = `
  WITH x AS (
    SELECT * FROM unnest($4::int[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS x(account_id, month, operation, at, i)
  ),
  m AS (
    SELECT m.id, m.held, x.account_id, x.month, x.operation, x.i
      FROM unnest($8::bigint[], $9::int[], $10::boolean[]) AS m(id, grp, held) JOIN x ON x.i = m.grp
  ),
  yc AS (
    SELECT u.account_id, u.month, u.operation, u.used FROM usage_counters u JOIN x USING (account_id, month, operation)
     ORDER BY u.account_id, u.month, u.operation FOR UPDATE OF u
  ),
  dh AS (
    DELETE FROM reservations r USING m
     WHERE m.held AND r.owner = $1::text AND r.id = m.id AND NOT r.refunded AND (SELECT count(*) FROM yc) >= 0 RETURNING r.id
  ),
  dm AS (
    INSERT INTO reservations AS r (owner, id, account_id, month, operation, refunded)
      SELECT $1::text, m.id, m.account_id, m.month, m.operation, true FROM m WHERE NOT m.held AND (SELECT count(*) FROM yc) >= 0 ORDER BY m.id
    ON CONFLICT (id, owner) DO UPDATE SET refunded = true WHERE NOT r.refunded
    RETURNING r.id
  ),
  done AS (SELECT id FROM dh UNION ALL SELECT id FROM dm),
  g AS (
    SELECT x.*, yc.used AS used_before, (SELECT count(*) FROM m JOIN done USING (id) WHERE m.i = x.i) AS n
      FROM x LEFT JOIN yc USING (account_id, month, operation)
  ),
  dc AS (
    UPDATE usage_counters u SET used = g.used_before - least(g.n, g.used_before) FROM g
     WHERE least(g.n, g.used_before) > 0 AND u.account_id = g.account_id AND u.month = g.month AND u.operation = g.operation
    RETURNING 1
  )
  SELECT g.i, g.used_before, ${LIMIT} AS lim, ARRAY(SELECT id FROM done) AS applied,
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

/**
 * The per-call arrays of a batch statement, after its groups': each call's hold id, its group (1-based,
 * in the order of `groups`) and `column` of it and its place in the group.
 */
export function memberArrays<M extends { hold: number }>(groups: readonly Group<M>[], column: (m: M, j: number) => number | boolean): unknown[] {
  const members = groups.flatMap((g, i) => g.members.map((m, j) => ({ m, group: i + 1, value: column(m, j) })));
  return [members.map((x) => x.m.hold), members.map((x) => x.group), members.map((x) => x.value)];
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
  readonly #gather: boolean;
  #queue: Pending<M, R>[] = [];
  #busy = false;
  #scheduled = false;

  /** `gather` false: each call is sent at once, alone and concurrently with the others (the plain path, for comparison). */
  constructor(run: (members: M[]) => Promise<(R | Error | typeof DEFER)[]>, gather = true) {
    this.#run = run;
    this.#gather = gather;
  }

  add(member: M): Promise<R> {
    if (!this.#gather) return this.#alone(member);
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ member, resolve, reject });
      this.#kick();
    });
  }

  async #alone(member: M): Promise<R> {
    for (;;) {
      const [r] = await this.#run([member]);
      if (r === DEFER) continue;
      if (r instanceof Error) throw r;
      return r as R;
    }
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
