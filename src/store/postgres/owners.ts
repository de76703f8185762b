/**
 * The PostgreSQL engine's owner ids and leases (the rules are ../owners.ts). An instance takes new
 * reservations under its current owner id and renews the lease of every id it still has reservations
 * under. A reserve whose statement was sent without an answer may have taken a unit no request of this
 * instance knows of: its owner id is retired (a fresh one takes new reservations), renewed while what this
 * instance knows was granted under it is outstanding, then released, which gives back exactly such units.
 */
import { LEASE_MS, SELECT_OWNERS, deadOwners, newOwner, registration, type OwnerDbRow, type OwnerIdentity } from '../owners.js';
import type { Query } from './connection.js';
import { ORPHAN_OWNERS, RELEASE_OWNER, ownerGaps } from './statements.js';

/** An owner id registered here: `busy` statements or reservations outstanding under it; `retired`: released once none is. */
interface OwnerUse {
  busy: number;
  retired: boolean;
}

export class PgOwners {
  readonly #q: Query;
  /** The owner id new reservations are taken under. */
  #current: OwnerIdentity = newOwner();
  /** Every owner id registered and not yet released, the current one included. */
  readonly #owners = new Map<string, OwnerUse>();
  #registered: Promise<void> | undefined;
  /** When the lease was last written (Date.now() before the statement): see leaseFresh. */
  #leaseAt = 0;
  /** Units given back from dead owners (and from this instance's released ones) since start. */
  reconciled = 0;

  constructor(query: Query) {
    this.#q = query;
  }

  get current(): OwnerIdentity {
    return this.#current;
  }

  /** Registers the current owner id (once; again after a failure). */
  async ensureRegistered(): Promise<void> {
    await (this.#registered ??= this.#register().catch((err: unknown) => {
      this.#registered = undefined;
      throw err;
    }));
  }

  /** The current owner, registered, with `n` statements counted busy under it (see unbusy). */
  async take(n: number): Promise<string> {
    for (;;) {
      const id = this.#current.id;
      await this.ensureRegistered();
      const use = this.#owners.get(id);
      if (use && this.#current.id === id) {
        use.busy += n;
        return id;
      }
    }
  }

  /** `n` statements or reservations under `id` are done; a retired owner with none left is released. */
  unbusy(id: string, n: number): void {
    const use = this.#owners.get(id);
    if (!use || n === 0) return;
    use.busy -= n;
    if (!use.retired || use.busy > 0) return;
    this.#owners.delete(id);
    // Gives back exactly the units no request of this instance knows of (every known one is done).
    // Failing that, it is renewed no more: its lease runs out and any instance's reconciliation does it.
    this.#q<{ units: number }>(RELEASE_OWNER, [id]).then(
      (r) => void (this.reconciled += r.rows[0]!.units),
      () => undefined,
    );
  }

  /** A reserve under `id` was sent and its outcome is not known: new reservations go under a fresh id. */
  retire(id: string): void {
    const use = this.#owners.get(id);
    if (!use || use.retired) return;
    use.retired = true;
    if (this.#current.id !== id) return;
    this.#current = newOwner();
    this.#registered = undefined;
  }

  /** Was the lease renewed recently enough that a statement sent now (answered within `timeoutMs`) lands before it could expire? */
  leaseFresh(timeoutMs: number): boolean {
    return Date.now() - this.#leaseAt < LEASE_MS - timeoutMs - 1000;
  }

  async #register(): Promise<void> {
    const o = this.#current;
    const at = Date.now();
    await this.#q(
      'INSERT INTO owners (id, host, pid, started, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at',
      registration(o, at),
    );
    // The lease time stands for every owner renewed together: a fresh owner beside retired ones leaves it.
    if ([...this.#owners.keys()].every((id) => id === o.id)) this.#leaseAt = at;
    if (!this.#owners.has(o.id)) this.#owners.set(o.id, { busy: 0, retired: false });
  }

  async renew(): Promise<void> {
    // A missing row means another instance took this owner for dead and gave its units back: the
    // current one registers again; the reservations it held fail at commit (reservation_lost).
    const at = Date.now();
    const ids = [...this.#owners.keys()];
    const r = await this.#q<{ id: string }>('UPDATE owners SET expires_at = $1 WHERE id = ANY($2::text[]) RETURNING id', [at + LEASE_MS, ids]);
    const renewed = new Set(r.rows.map((row) => row.id));
    for (const id of ids) if (!renewed.has(id) && id !== this.#current.id) this.#owners.delete(id);
    if (this.#owners.has(this.#current.id) && !renewed.has(this.#current.id)) await this.#register();
    this.#leaseAt = at;
  }

  /** Gives back the units held by dead owners (expired lease, a dead process on this host, or never registered). */
  async reconcile(now: Date): Promise<number> {
    const owners = await this.#q<OwnerDbRow>(SELECT_OWNERS);
    const dead = deadOwners(owners.rows, this.#current, now.getTime());
    // Owners with hold rows that are not registered (an instance of before schema 4 took them for dead and
    // deleted their owner row, or their rows outlived it): every owner known here is a bound of the search.
    const known = new Set([...owners.rows.map((o) => o.id), this.#current.id, ...this.#owners.keys()]);
    for (let found = await this.#orphans(known); found.length > 0; found = await this.#orphans(known)) {
      for (const owner of found) {
        known.add(owner);
        dead.push(owner);
      }
    }
    const oldHolds = await this.#q<{ owner: string }>('SELECT owner FROM holds WHERE owner NOT IN (SELECT id FROM owners)');
    for (const { owner } of oldHolds.rows) if (!known.has(owner)) dead.push(owner);
    let units = 0;
    for (const id of dead) units += (await this.#q<{ units: number }>(RELEASE_OWNER, [id])).rows[0]!.units;
    this.reconciled += units;
    return units;
  }

  /** The first owner of hold rows in each gap between the `known` owners (ORPHAN_OWNERS). */
  async #orphans(known: ReadonlySet<string>): Promise<string[]> {
    const { lo, hi, last } = ownerGaps(known);
    return (await this.#q<{ owner: string }>(ORPHAN_OWNERS, [lo, hi, last])).rows.map((r) => r.owner);
  }

  /** At close: whatever this instance still holds was never answered; it goes back now rather than at expiry. */
  async releaseAll(): Promise<void> {
    for (const id of this.#owners.keys()) await this.#q(RELEASE_OWNER, [id]);
  }
}
