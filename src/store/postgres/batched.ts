/**
 * The PostgreSQL engine's batching and pipelining: concurrent requests' reserves, commits and refunds go
 * in one statement per kind and event-loop turn (the statements and the queue are ./batch.ts), each
 * answered exactly as if it had been alone, in arrival order; and a commit whose answer may go out is
 * written to its connection before PostgreSQL answers it (`onSent`).
 *
 * Which path runs when: with `gather` (the default) a turn of several calls of a kind takes the batch
 * statement and a turn of one the single-row statement (./statements.ts); without it (the plain path,
 * kept for side-by-side runs: bench/store-batching.bench.ts) every call takes the single-row statement
 * (a refund, its batch statement with one call) on a connection of its own, at once.
 */
import type pg from 'pg';
import { StoreError } from '../errors.js';
import type { Operation, QuotaState } from '../quota.js';
import { Batcher, DEFER, RESERVE_BATCH, COMMIT_BATCH, REFUND_BATCH, groupArrays, groupsOf, memberArrays } from './batch.js';
import { isAnswered, isUnavailable, unavailable, type PgConnection } from './connection.js';
import type { PgOwners } from './owners.js';
import { COMMIT, RESERVE } from './statements.js';

interface Call {
  /** The reservation's hold id. */
  hold: number;
  accountId: number;
  /** The month the unit is taken from (or was). */
  month: string;
  operation: Operation;
  /** The month whose counter the answer shows. */
  at: string;
}
export type ReserveCall = Call;
/** `used`: the counter after this call (granted), or as it stands (refused); `owner`: whose hold has the unit. */
export type ReserveAnswer = { granted: boolean; lim: number; used: number; owner: string };
export interface CommitCall extends Call {
  /** The owner whose hold has the unit. */
  owner: string;
  /** Runs once the statement is written (lease fresh) or once it is answered. */
  onSent?: (() => void) | undefined;
  sent: boolean;
  /** What `onSent` threw. */
  failed?: unknown;
}
export type CommitAnswer = { released: boolean; lim: number; used: number };
export interface RefundCall extends Call {
  /** Still held (not committed). */
  held: boolean;
  /** The owner whose hold has the unit. */
  owner: string;
}
/** Undefined when the account is gone. */
export type RefundAnswer = { lim: number; used: number } | undefined;

type Answers<R> = Promise<(R | Error | typeof DEFER)[]>;

export interface BatchContext {
  conn: PgConnection;
  owners: PgOwners;
  defaults: Readonly<Record<Operation, number>>;
  /** The counter as it stands (a refused single reserve's answer). */
  state(accountId: number, op: Operation, month: string, now: Date): Promise<QuotaState>;
}

export class PgBatches {
  readonly #c: BatchContext;
  readonly reserves: Batcher<ReserveCall, ReserveAnswer>;
  readonly commits: Batcher<CommitCall, CommitAnswer>;
  readonly refunds: Batcher<RefundCall, RefundAnswer>;

  constructor(context: BatchContext, gather: boolean) {
    this.#c = context;
    this.reserves = new Batcher((calls) => this.#reserveBatch(calls), gather);
    this.commits = new Batcher((calls) => this.#commitBatch(calls), gather);
    this.refunds = new Batcher((calls) => this.#refundBatch(calls), gather);
  }

  /** $1..$3 of every batch statement. */
  #head(owner: string): unknown[] {
    return [owner, this.#c.defaults.protect, this.#c.defaults.verify];
  }

  /**
   * Reserves of one turn under the current owner (a statement whose outcome is not known retires it,
   * see ./owners.ts); each unit granted stays counted in the owner's `busy` until its reservation is done.
   */
  async #reserveBatch(calls: ReserveCall[]): Answers<ReserveAnswer> {
    const owners = this.#c.owners;
    const owner = await owners.take(calls.length);
    const sent = { written: false };
    const onWritten = () => void (sent.written = true);
    let out: (ReserveAnswer | Error | typeof DEFER)[];
    try {
      out = calls.length === 1 ? [await this.#reserveAlone(calls[0]!, owner, onWritten)] : await this.#reserveMany(calls, owner, onWritten);
    } catch (err) {
      if (sent.written && !isAnswered(err)) owners.retire(owner);
      owners.unbusy(owner, calls.length);
      throw err;
    }
    owners.unbusy(owner, out.filter((a) => a === DEFER || a instanceof Error || !a.granted).length);
    return out;
  }

  /** Per counter, the first min(k, limit - used) calls get a unit. */
  async #reserveMany(calls: ReserveCall[], owner: string, onWritten: () => void): Answers<ReserveAnswer> {
    const { groups } = groupsOf(calls);
    const rows = await this.#c.conn.send<{ lim: number | null; before: number | null; granted: number | null; won: boolean | null }>(
      'optmark_reserve_batch',
      RESERVE_BATCH,
      [...this.#head(owner), ...groupArrays(groups, (g) => g.members.length), ...memberArrays(groups, (_, j) => j + 1)],
      onWritten,
    );
    const out = new Map<ReserveCall, ReserveAnswer | Error | typeof DEFER>();
    groups.forEach((g, i) => {
      const row = rows[i]!;
      if (row.lim === null) {
        for (const c of g.members) out.set(c, new StoreError('unknown_account', `no account with id ${c.accountId}`));
        return;
      }
      const granted = row.granted ?? 0;
      if (granted > 0 && !row.won) {
        // Another instance created the counter row in the same instant: counted in the next batch.
        for (const c of g.members) out.set(c, DEFER);
        return;
      }
      const before = row.before ?? 0;
      g.members.forEach((c, j) => {
        out.set(c, { granted: j < granted, lim: row.lim!, used: j < granted ? before + j + 1 : before + granted, owner });
      });
    });
    return calls.map((c) => out.get(c)!);
  }

  /** A reserve alone in its turn: the single-row statement. */
  async #reserveAlone(c: ReserveCall, owner: string, onWritten: () => void): Promise<ReserveAnswer | Error> {
    const [taken] = await this.#c.conn.send<{ used: number; lim: number }>(
      'optmark_reserve',
      RESERVE,
      [c.accountId, c.month, c.operation, this.#c.defaults[c.operation], owner, c.hold],
      onWritten,
    );
    if (taken) return { granted: true, lim: taken.lim, used: taken.used, owner };
    const state = await this.#c.state(c.accountId, c.operation, c.month, new Date()).catch((err: unknown) => err as Error);
    return state instanceof Error ? state : { granted: false, lim: state.limit, used: state.used, owner };
  }

  /** Commits of one turn: per counter, the first min(k, held) are taken off this instance's hold. */
  async #commitBatch(all: CommitCall[]): Answers<CommitAnswer> {
    // One owner per statement: the others' calls go in the next.
    const owner = all[0]!.owner;
    const calls = all.filter((c) => c.owner === owner);
    const { groups, later } = groupsOf(calls);
    // Sent before the answer only while the lease is fresh: a statement that lands after this
    // instance's holds were reclaimed would not count.
    const early = calls.filter((c) => c.onSent && !later.has(c));
    const onWritten =
      early.length > 0 && this.#c.owners.leaseFresh(this.#c.conn.timeoutMs)
        ? () => {
            for (const c of early) {
              c.sent = true;
              try {
                c.onSent!();
              } catch (err) {
                c.failed = err; // thrown to its caller once the statement is answered; the others go on
              }
            }
          }
        : undefined;
    // A commit alone in its turn: the single-row statement (one group of one; the answer's shape is the same).
    const alone = calls.length === 1 && groups.length === 1;
    const g0 = groups[0]!;
    const rows = await this.#c.conn.send<{ released: number | string[]; lim: number; used: number }>(
      alone ? 'optmark_commit' : 'optmark_commit_batch',
      alone ? COMMIT : COMMIT_BATCH,
      alone
        ? [owner, g0.accountId, g0.month, g0.operation, g0.at, this.#c.defaults[g0.operation], g0.members[0]!.hold]
        : [...this.#head(owner), ...groupArrays(groups, (g) => g.at), groups.flatMap((g) => g.members.map((c) => c.hold))],
      onWritten,
    );
    // The single statement answers 1 or 0 (no row for an account gone); the batch, the hold ids released.
    const released = alone ? undefined : new Set((rows[0]?.released as string[] | undefined)?.map(Number));
    const out = new Map<CommitCall, CommitAnswer>();
    groups.forEach((g, i) => {
      const row = rows[i] ?? { released: 0, lim: 0, used: 0 };
      for (const c of g.members) out.set(c, { released: released ? released.has(c.hold) : row.released === 1, lim: row.lim, used: row.used });
    });
    return all.map((c) => out.get(c) ?? DEFER);
  }

  /** Refunds of one turn, replayed in arrival order on the counter and hold values they were applied to. */
  async #refundBatch(all: RefundCall[]): Answers<RefundAnswer> {
    const owner = all[0]!.owner;
    const calls = all.filter((c) => c.owner === owner);
    const { groups, later } = groupsOf(calls);
    const rows = await this.#c.conn.send<{ applied: string[]; used_before: number | null; lim: number | null; used_at: number }>(
      'optmark_refund_batch',
      REFUND_BATCH,
      [...this.#head(owner), ...groupArrays(groups, (g) => g.at), ...memberArrays(groups, (c) => c.held)],
    );
    const applied = new Set(rows[0]?.applied.map(Number));
    const out = new Map<RefundCall, RefundAnswer>();
    groups.forEach((g, i) => {
      const row = rows[i]!;
      let used = row.used_before;
      for (const c of g.members) {
        // Only a call that took its unit off (not given back before) lowers the counter.
        if (applied.has(c.hold) && used !== null && used > 0) used--;
        // The answer shows the counter after this call (the month it was taken from), else the month of now.
        const shown = g.at === g.month && used !== null ? used : row.used_at;
        out.set(c, row.lim === null ? undefined : { lim: row.lim, used: shown });
      }
    });
    return all.map((c) => (c.owner !== owner || later.has(c) ? DEFER : out.get(c)));
  }
}

/**
 * Writes `query` to a connection, then runs `onSent` at once, before the answer comes back. Written means
 * PostgreSQL gets it even if this process is killed the next instant (the kernel sends what the socket
 * holds), so the unit and the answer's last byte go out together. The caller sends this way only while
 * the lease is fresh. A failure after `onSent` calls `lostAfterSent` (the answer went out; whether the
 * statement ran is not known) before it is thrown.
 */
export async function sendPipelined<R extends pg.QueryResultRow>(
  conn: PgConnection,
  query: { name: string; text: string; values: unknown[] },
  onSent: () => void,
  lostAfterSent: () => void,
): Promise<R | undefined> {
  const client = await conn.connection();
  let sent = false;
  let failure: Error | undefined;
  try {
    // node-postgres writes the statement to the socket inside query() when the connection is idle (a
    // pooled connection is): it is on its way when the call returns.
    const pending = client.query<R>(query);
    sent = true;
    onSent();
    return (await pending).rows[0];
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
    if (sent) lostAfterSent();
    throw isUnavailable(err) ? unavailable(err, conn.location) : err;
  } finally {
    client.release(failure);
  }
}
