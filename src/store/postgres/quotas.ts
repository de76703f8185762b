/**
 * The PostgreSQL engine's quotas: `reserve` is one statement. The counter row of (account, month,
 * operation) is where every instance's reservations meet: `INSERT ... ON CONFLICT DO UPDATE SET used =
 * used + 1 WHERE used < limit` locks that row and evaluates the WHERE on its latest version (also under
 * Read Committed), so no number of instances can take more than the limit. The same statement inserts the
 * reservation's hold row (its id, under this instance's owner id) into `reservations`. `commit` deletes
 * the row (the unit stays counted); `refund` deletes it and takes the unit off the counter (after a commit:
 * marks it refunded). Each acts on its own row, so sent again it changes nothing. A unit is given back
 * exactly once: by the refund, or by a reconciliation that deletes a dead instance's hold rows and
 * subtracts them from the counters in one statement (row locks order them). Concurrent calls are batched
 * (./batched.ts). No unit is ever granted without its reservation having been written.
 */
import { unknownAccountId } from '../accounts.js';
import { Reservations, reservationLost } from '../common.js';
import { IDEMPOTENCY_TTL_MS, priorOf, uploadDigest, type IdempotentRequest, type KeyRow as IdemRow } from '../idempotency.js';
import { monthOf, quotaStateOf, type Operation, type QuotaState } from '../quota.js';
import type { Reservation, ReserveResult } from '../types.js';
import { PgBatches, sendPipelined, type CommitAnswer, type CommitCall, type RefundAnswer } from './batched.js';
import { isAnswered, type PgConnection } from './connection.js';
import { DROP_KEY } from './idempotency.js';
import type { PgOwners } from './owners.js';
import { COMMIT, COMMIT_KEYED, DROP_MARKERS, REFUND_KEYED, RESERVE_KEYED, STATE } from './statements.js';

type Row = { released: number; lim: number; used: number };

export class PgQuotas {
  readonly #conn: PgConnection;
  readonly #owners: PgOwners;
  readonly #defaults: Readonly<Record<Operation, number>>;
  readonly #batches: PgBatches;
  readonly #reservations = new Reservations();
  /** The owner each reservation still counted in its owner's `busy` was taken under. */
  readonly #ownerOf = new WeakMap<Reservation, string>();
  /** Refunds the database could not take when asked: retried with each reconciliation. */
  readonly #retry = new Set<Reservation>();
  /** Commits sent whose outcome is unknown (the connection failed after the answer went out): done again. */
  readonly #commitRetry = new Set<Reservation>();
  /** Rows marking committed units given back, whose refund was answered (no longer needed): deleted in the background. */
  readonly #markers: { owner: string; hold: number }[] = [];
  /** The next reservation's hold id (unique within this store, so within each of its owner ids). */
  #nextHold = 1;

  constructor(conn: PgConnection, owners: PgOwners, defaults: Readonly<Record<Operation, number>>, gather: boolean) {
    this.#conn = conn;
    this.#owners = owners;
    this.#defaults = defaults;
    this.#batches = new PgBatches({ conn, owners, defaults, state: (id, op, month, now) => this.state(id, op, month, now) }, gather);
  }

  async reserve(accountId: number, op: Operation, now: Date, idempotency?: IdempotentRequest): Promise<ReserveResult> {
    const month = monthOf(now);
    if (idempotency) return this.#reserveKeyed(accountId, op, month, now, idempotency);
    const hold = this.#nextHold++;
    const taken = await this.#batches.reserves.add({ hold, accountId, month, operation: op, at: month });
    const state = quotaStateOf(op, taken.lim, taken.used, month, now);
    if (!taken.granted) return { ok: false, state };
    return { ok: true, reservation: this.#held(this.#reservations.create(hold, accountId, op, month), taken.owner), state };
  }

  /** A reservation granted under `owner` (counted in its `busy` until it is committed or given back). */
  #held(res: Reservation, owner: string): Reservation {
    this.#ownerOf.set(res, owner);
    return res;
  }

  /** The owner a reservation was taken under (the current one for a reservation done with its hold). */
  #ownerFor(res: Reservation): string {
    return this.#ownerOf.get(res) ?? this.#owners.current.id;
  }

  /** The reservation's new state; one no longer held (with a known outcome) is done with its owner. */
  #set(res: Reservation, state: 'held' | 'committed' | undefined): void {
    this.#reservations.set(res, state);
    if (state !== 'held') this.#done(res);
  }

  #done(res: Reservation): void {
    const id = this.#ownerOf.get(res);
    if (id === undefined || this.#commitRetry.has(res)) return;
    this.#ownerOf.delete(res);
    this.#owners.unbusy(id, 1);
  }

  async #reserveKeyed(accountId: number, op: Operation, month: string, now: Date, idempotency: IdempotentRequest): Promise<ReserveResult> {
    const key = idempotency.key;
    const t = now.getTime();
    const owner = await this.#owners.take(1);
    const hold = this.#nextHold++;
    let granted = false;
    try {
      const r = await this.#conn
        .q<{
          lim: number | null;
          used: number | null;
          keyed: number;
          prior_state: IdemRow['state'] | null;
          prior_operation: Operation | null;
          prior_sha256: string | null;
        }>(RESERVE_KEYED, [accountId, month, op, this.#defaults[op], owner, key, t, t + IDEMPOTENCY_TTL_MS, hold], 'optmark_reserve_keyed')
        .catch((err: unknown) => {
          // Sent or not (the pool does not say): a statement that may have run retires its owner.
          if (!isAnswered(err)) this.#owners.retire(owner);
          throw err;
        });
      const row = r.rows[0]!;
      if (row.keyed === 0 && row.lim !== null) {
        const prior = row.prior_state && row.prior_operation ? { state: row.prior_state, operation: row.prior_operation, sha256: row.prior_sha256 } : undefined;
        return { ok: false, state: await this.state(accountId, op, month, now), prior: priorOf(prior) };
      }
      if (row.used === null || row.lim === null) {
        // Over the limit (or no such account: state() says so): the key taken without a unit goes back.
        if (row.keyed === 1) await this.#conn.q(DROP_KEY, [accountId, key, owner], 'optmark_drop_key');
        return { ok: false, state: await this.state(accountId, op, month, now) };
      }
      granted = true;
      const reservation = this.#held(this.#reservations.create(hold, accountId, op, month, idempotency), owner);
      return { ok: true, reservation, state: quotaStateOf(op, row.lim, row.used, month, now) };
    } finally {
      if (!granted) this.#owners.unbusy(owner, 1);
    }
  }

  /** The commit statement of a reservation (with its key and the upload's digest when it has one). */
  #commitQuery(res: Reservation, month: string, now: Date): { name: string; text: string; values: unknown[] } {
    const values: unknown[] = [this.#ownerFor(res), res.accountId, res.month, res.operation, month, this.#defaults[res.operation], res.id];
    const key = res.idempotency;
    if (!key) return { name: 'optmark_commit', text: COMMIT, values };
    return { name: 'optmark_commit_keyed', text: COMMIT_KEYED, values: [...values, key.key, uploadDigest(key), now.getTime() + IDEMPOTENCY_TTL_MS] };
  }

  commit(res: Reservation, now: Date, onSent?: () => void): Promise<QuotaState | undefined> {
    return this.#reservations.serial(res, () => this.#commit(res, now, onSent));
  }

  /** The answer went out; whether the statement ran is not known. Counted as committed, and done again once the database answers. */
  #sentUnknown(res: Reservation): void {
    this.#commitRetry.add(res);
    this.#set(res, 'committed');
  }

  async #commit(res: Reservation, now: Date, onSent: (() => void) | undefined): Promise<QuotaState | undefined> {
    const state = this.#reservations.state(res);
    if (state !== 'held') {
      if (onSent && state === undefined) throw reservationLost(); // refunded or reclaimed: no answer
      onSent?.();
      return undefined;
    }
    const m = monthOf(now);
    if (res.idempotency) return this.#commitKeyed(res, m, now, onSent);
    const call: CommitCall = {
      hold: res.id,
      accountId: res.accountId,
      month: res.month,
      operation: res.operation,
      at: m,
      owner: this.#ownerFor(res),
      onSent,
      sent: false,
    };
    let row: CommitAnswer;
    try {
      row = await this.#batches.commits.add(call);
    } catch (err) {
      if (call.sent) this.#sentUnknown(res); // taking a hold that is already gone changes nothing
      throw err;
    }
    if (!row.released) {
      if (this.#reservations.state(res) === 'held') this.#set(res, undefined);
      throw reservationLost();
    }
    this.#set(res, 'committed');
    if (call.failed !== undefined) throw call.failed;
    if (!call.sent) onSent?.();
    return quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  /** A keyed reservation's commit (its key recorded in the same statement): one statement of its own. */
  async #commitKeyed(res: Reservation, m: string, now: Date, onSent: (() => void) | undefined): Promise<QuotaState | undefined> {
    const query = this.#commitQuery(res, m, now);
    let row: Row | undefined;
    if (onSent && this.#owners.leaseFresh(this.#conn.timeoutMs)) {
      row = await sendPipelined<Row>(this.#conn, query, onSent, () => this.#sentUnknown(res));
    } else {
      row = (await this.#conn.q<Row>(query.text, query.values, query.name)).rows[0];
      if (row?.released === 1) {
        this.#set(res, 'committed');
        onSent?.();
      }
    }
    if (row?.released !== 1) {
      if (this.#reservations.state(res) === 'held') this.#set(res, undefined);
      throw reservationLost();
    }
    this.#set(res, 'committed');
    return quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  refund(res: Reservation, now: Date): Promise<QuotaState | undefined> {
    return this.#reservations.serial(res, () => this.#refund(res, now));
  }

  async #refund(res: Reservation, now: Date): Promise<QuotaState | undefined> {
    const state = this.#reservations.state(res);
    if (state === undefined) return undefined;
    const m = monthOf(now);
    let row: RefundAnswer;
    try {
      // A committed unit's refund marks its hold row under one owner, which every sending of it must name
      // and which must outlive them: the current one, kept busy until the refund is answered.
      if (!this.#ownerOf.has(res)) this.#ownerOf.set(res, await this.#owners.take(1));
      const key = res.idempotency?.key;
      row = key
        ? await this.#refundKeyed(res, key, m)
        : await this.#batches.refunds.add({
            hold: res.id,
            accountId: res.accountId,
            month: res.month,
            operation: res.operation,
            at: m,
            held: state === 'held',
            owner: this.#ownerFor(res),
          });
    } catch (err) {
      // The database could not take it now: retried by the background work until it can (a held unit
      // of a live instance is never reclaimed by anyone else).
      this.#retry.add(res);
      throw err;
    }
    this.#retry.delete(res);
    // Answered: no sending of it is left, so its mark (if it made one) is of no more use.
    if (state === 'committed') this.#markers.push({ owner: this.#ownerFor(res), hold: res.id });
    this.#set(res, undefined);
    return row && quotaStateOf(res.operation, row.lim, row.used, m, now);
  }

  /** A keyed reservation's refund (its key given back in the same statement). */
  async #refundKeyed(res: Reservation, key: string, m: string): Promise<RefundAnswer> {
    const held = this.#reservations.state(res) === 'held';
    const r = await this.#conn.q<{ lim: number; used: number; after: number | null; same_month: boolean }>(
      REFUND_KEYED,
      [this.#ownerFor(res), res.accountId, res.month, res.operation, m, this.#defaults[res.operation], held, res.id, key],
      'optmark_refund_keyed',
    );
    const row = r.rows[0];
    // The state read in the statement predates its own update: show the unit given back.
    return row && { lim: row.lim, used: row.same_month && row.after !== null ? row.after : row.used };
  }

  /** The counter of `op` in `month` as seen at `now`. */
  async state(accountId: number, op: Operation, month: string, now: Date): Promise<QuotaState> {
    const r = await this.#conn.q<{ lim: number; used: number }>(STATE, [accountId, op, this.#defaults[op], month], 'optmark_state');
    const row = r.rows[0];
    if (!row) throw unknownAccountId(accountId);
    return quotaStateOf(op, row.lim, row.used, month, now);
  }

  /** The background's part: refunds and commits that failed, done again; marks of answered refunds deleted. */
  async retryPending(): Promise<void> {
    for (const r of [...this.#retry]) await this.refund(r, new Date());
    for (const r of [...this.#commitRetry]) await this.#recommit(r);
    await this.#dropMarkers();
  }

  /** A commit whose outcome was not known, done again (a commit that did run finds its hold row gone: nothing changes). */
  async #recommit(res: Reservation): Promise<void> {
    const query = this.#commitQuery(res, res.month, new Date());
    await this.#conn.q(query.text, query.values, query.name);
    this.#commitRetry.delete(res);
    this.#done(res);
  }

  async #dropMarkers(): Promise<void> {
    if (this.#markers.length === 0) return;
    const rows = this.#markers.splice(0);
    try {
      await this.#conn.q(DROP_MARKERS, [rows.map((m) => m.owner), rows.map((m) => m.hold)]);
    } catch (err) {
      this.#markers.push(...rows);
      throw err;
    }
  }
}
