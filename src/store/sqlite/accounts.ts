/**
 * The SQLite engine's operator side: accounts, their plans and limits, API keys, usage. Each call is a
 * statement or two on the calling thread; a read-then-write takes the write lock first (IMMEDIATE), so a
 * concurrent writer cannot make it fail with SQLITE_BUSY_SNAPSHOT.
 */
import type { Db } from '../db.js';
import { ACCOUNT_COLUMNS, KEY_COLUMNS, duplicateAccount, nextLimits, toAccount, toKeyInfo, usageOf, type AccountRow, type KeyRow } from '../accounts.js';
import { BOOTSTRAP_ACCOUNT, checkAccountName, checkLimits, checkPlan, keyLookup, pickByPrefix, unknownAccount } from '../common.js';
import { StoreError } from '../errors.js';
import { displayPrefix, generateKey, hashKey } from '../keys.js';
import { monthOf, parseMonth, type Operation, type QuotaState } from '../quota.js';
import type { Account, KeyInfo, Plan, Usage } from '../types.js';

/** The counter of one operation in one month, as the engine reads it. */
export type StateOf = (accountId: number, op: Operation, month: string, now: Date) => QuotaState;

export class SqliteAccounts {
  readonly #db: Db;
  readonly #defaults: Record<Operation, number>;
  readonly #state: StateOf;
  readonly #byName;
  readonly #all;
  readonly #insert;
  readonly #setPlan;
  readonly #setLimits;
  readonly #count;
  readonly #insertKey;
  readonly #keysOf;
  readonly #keyByHash;
  readonly #keysByPrefix;
  readonly #revoke;
  readonly #heldOf;

  constructor(db: Db, defaults: Record<Operation, number>, state: StateOf) {
    this.#db = db;
    this.#defaults = defaults;
    this.#state = state;
    this.#byName = db.prepare<[string], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE a.name = ?`);
    this.#all = db.prepare<[], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY a.name`);
    this.#insert = db.prepare<[string, Plan, string], AccountRow>(
      `INSERT INTO accounts (name, plan, created_at) VALUES (?, ?, ?) RETURNING id, name, plan, protect_limit, verify_limit, created_at`,
    );
    this.#setPlan = db.prepare<[Plan, number]>('UPDATE accounts SET plan = ? WHERE id = ?');
    this.#setLimits = db.prepare<[number | null, number | null, number]>('UPDATE accounts SET protect_limit = ?, verify_limit = ? WHERE id = ?');
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM accounts');
    this.#insertKey = db.prepare<[number, Buffer, string, string], { id: number }>(
      'INSERT INTO api_keys (account_id, hash, prefix, created_at) VALUES (?, ?, ?, ?) RETURNING id',
    );
    const keys = `SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id`;
    this.#keysOf = db.prepare<[number], KeyRow>(`${keys} WHERE k.account_id = ? ORDER BY k.id`);
    this.#keyByHash = db.prepare<[Buffer], KeyRow>(`${keys} WHERE k.hash = ?`);
    // A range instead of LIKE: '_' in the fixed prefix is a LIKE wildcard, and '~' sorts after every
    // base62 character, so [p, p + '~') is exactly "starts with p" and uses the prefix index.
    this.#keysByPrefix = db.prepare<[string, string], KeyRow>(`${keys} WHERE k.prefix >= ? AND k.prefix < ? ORDER BY k.id`);
    this.#revoke = db.prepare<[string, number]>('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
    // `holds`: the counts of owners of an optmark before the hold rows (schema 5), during a rolling restart.
    this.#heldOf = db.prepare<[{ account: number; month: string }], { operation: Operation; n: number }>(
      `SELECT operation, sum(n) AS n FROM (
         SELECT operation, n FROM holds WHERE account_id = :account AND month = :month
         UNION ALL SELECT operation, 1 FROM reservations WHERE account_id = :account AND month = :month
       ) GROUP BY operation`,
    );
  }

  bootstrapIfEmpty(): { account: Account; key: string } | undefined {
    // IMMEDIATE: two servers starting on one empty directory must not both create an account.
    return this.#db
      .transaction(() => {
        if (this.#count.get()!.n > 0) return undefined;
        const account = this.createAccount(BOOTSTRAP_ACCOUNT, 'pro', new Date());
        return { account, key: this.issueKey(account.name, new Date()).key };
      })
      .immediate();
  }

  createAccount(name: string, plan: Plan, now: Date): Account {
    checkAccountName(name);
    checkPlan(plan);
    try {
      return this.#toAccount(this.#insert.all(name, plan, now.toISOString())[0]!);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw duplicateAccount(name);
      throw err;
    }
  }

  listAccounts(): Account[] {
    return this.#all.all().map((row) => this.#toAccount(row));
  }

  getAccount(name: string): Account {
    return this.#toAccount(this.row(name));
  }

  setPlan(name: string, plan: Plan): Account {
    checkPlan(plan);
    const row = this.row(name);
    this.#setPlan.run(plan, row.id);
    return this.#toAccount({ ...row, plan });
  }

  setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Account {
    checkLimits(limits);
    return this.#db
      .transaction(() => {
        const row = this.row(name);
        const next = nextLimits(row, limits);
        this.#setLimits.run(next.protect, next.verify, row.id);
        return this.#toAccount({ ...row, protect_limit: next.protect, verify_limit: next.verify });
      })
      .immediate();
  }

  issueKey(accountName: string, now: Date): { key: string; prefix: string; id: number } {
    const row = this.row(accountName);
    const key = generateKey();
    const prefix = displayPrefix(key);
    const { id } = this.#insertKey.all(row.id, hashKey(key), prefix, now.toISOString())[0]!;
    return { key, prefix, id };
  }

  listKeys(accountName: string): KeyInfo[] {
    return this.#keysOf.all(this.row(accountName).id).map(toKeyInfo);
  }

  revokeKey(prefix: string, now: Date): { prefix: string; account: string; alreadyRevoked: boolean } {
    const key = this.#findKey(prefix.trim());
    const changed = this.#revoke.run(now.toISOString(), key.id).changes === 1;
    return { prefix: key.prefix, account: key.account, alreadyRevoked: !changed };
  }

  usage(accountName: string, month: string | undefined, now: Date): Usage {
    const m = month === undefined ? monthOf(now) : parseMonth(month);
    const { id } = this.row(accountName);
    return usageOf(m, this.#state(id, 'protect', m, now), this.#state(id, 'verify', m, now), this.#heldOf.all({ account: id, month: m }));
  }

  /** The account named `name` (names ignore case), or unknown_account. */
  row(name: string): AccountRow {
    const row = this.#byName.get(name);
    if (!row) throw unknownAccount(name);
    return row;
  }

  #toAccount(row: AccountRow): Account {
    return toAccount(row, this.#defaults);
  }

  #findKey(arg: string): KeyRow {
    const lookup = keyLookup(arg);
    if (lookup.kind === 'whole') {
      const row = this.#keyByHash.get(hashKey(lookup.key));
      if (!row) throw new StoreError('unknown_key', 'no key matches that key');
      return row;
    }
    const rows = this.#keysByPrefix.all(lookup.prefix, `${lookup.prefix}~`).map((r) => ({ ...r, revoked: r.revoked_at !== null }));
    return pickByPrefix(rows, lookup.shown);
  }
}
