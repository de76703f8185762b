/**
 * The PostgreSQL engine's operator side: accounts, their plans and limits, API keys, usage. Names ignore
 * case (a unique index on lower(name)). A change through this instance clears its authentication cache.
 */
import type pg from 'pg';
import { ACCOUNT_COLUMNS, KEY_COLUMNS, duplicateAccount, toAccount, toKeyInfo, usageOf, type AccountRow, type KeyRow } from '../accounts.js';
import { BOOTSTRAP_ACCOUNT, checkAccountName, checkLimits, checkPlan, keyLookup, pickByPrefix, unknownAccount } from '../common.js';
import { StoreError } from '../errors.js';
import { displayPrefix, generateKey, hashKey } from '../keys.js';
import { monthOf, parseMonth, type Operation, type QuotaState } from '../quota.js';
import type { Account, KeyInfo, Plan, Usage } from '../types.js';
import type { PgConnection } from './connection.js';

export interface AccountsContext {
  conn: PgConnection;
  defaults: Readonly<Record<Operation, number>>;
  state(accountId: number, op: Operation, month: string, now: Date): Promise<QuotaState>;
  /** Forgets cached key rows (a plan, limit or key change made here applies to the next request). */
  forgetKeys(): void;
}

export class PgAccounts {
  readonly #c: AccountsContext;

  constructor(context: AccountsContext) {
    this.#c = context;
  }

  #toAccount(row: AccountRow): Account {
    return toAccount(row, this.#c.defaults);
  }

  async bootstrapIfEmpty(): Promise<{ account: Account; key: string } | undefined> {
    return this.#c.conn.tx(async (c) => {
      // Two instances starting on an empty database: the lock makes the second see the first's account.
      await c.query('LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE');
      const n = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM accounts');
      if (n.rows[0]!.n > 0) return undefined;
      const account = await this.#insertAccount(c, BOOTSTRAP_ACCOUNT, 'pro', new Date());
      const { key } = await this.#insertKey(c, account.id, new Date());
      return { account, key };
    });
  }

  async createAccount(name: string, plan: Plan, now: Date): Promise<Account> {
    checkAccountName(name);
    checkPlan(plan);
    return this.#insertAccount(undefined, name, plan, now);
  }

  /** Runs `text` on `c` (inside a transaction) or on the pool. */
  #on<R extends pg.QueryResultRow>(c: pg.PoolClient | undefined, text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return c ? c.query<R>(text, values) : this.#c.conn.q<R>(text, values);
  }

  async #insertAccount(c: pg.PoolClient | undefined, name: string, plan: Plan, now: Date): Promise<Account> {
    const text = `INSERT INTO accounts AS a (name, plan, created_at) VALUES ($1, $2, $3) RETURNING ${ACCOUNT_COLUMNS}`;
    try {
      return this.#toAccount((await this.#on<AccountRow>(c, text, [name, plan, now])).rows[0]!);
    } catch (err) {
      if ((err as { code?: unknown }).code === '23505') throw duplicateAccount(name);
      throw err;
    }
  }

  async listAccounts(): Promise<Account[]> {
    const r = await this.#c.conn.q<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a ORDER BY lower(a.name), a.name`);
    return r.rows.map((row) => this.#toAccount(row));
  }

  async getAccount(name: string): Promise<Account> {
    return this.#toAccount(await this.row(name));
  }

  async setPlan(name: string, plan: Plan): Promise<Account> {
    checkPlan(plan);
    return this.#update(name, 'plan = $2', [plan]);
  }

  async setLimits(name: string, limits: { protect?: number | null; verify?: number | null }): Promise<Account> {
    checkLimits(limits);
    return this.#update(
      name,
      `protect_limit = CASE WHEN $2 THEN $3::bigint ELSE a.protect_limit END, verify_limit = CASE WHEN $4 THEN $5::bigint ELSE a.verify_limit END`,
      [limits.protect !== undefined, limits.protect ?? null, limits.verify !== undefined, limits.verify ?? null],
    );
  }

  /** One UPDATE of the account named $1 (`set` with its values from $2). */
  async #update(name: string, set: string, values: unknown[]): Promise<Account> {
    const r = await this.#c.conn.q<AccountRow>(`UPDATE accounts a SET ${set} WHERE lower(a.name) = lower($1) RETURNING ${ACCOUNT_COLUMNS}`, [name, ...values]);
    if (!r.rows[0]) throw unknownAccount(name);
    this.#c.forgetKeys();
    return this.#toAccount(r.rows[0]);
  }

  async issueKey(accountName: string, now: Date): Promise<{ key: string; prefix: string; id: number }> {
    const row = await this.row(accountName);
    return this.#insertKey(undefined, row.id, now);
  }

  async #insertKey(c: pg.PoolClient | undefined, accountId: number, now: Date): Promise<{ key: string; prefix: string; id: number }> {
    const key = generateKey();
    const prefix = displayPrefix(key);
    const r = await this.#on<{ id: number }>(c, 'INSERT INTO api_keys (account_id, hash, prefix, created_at) VALUES ($1, $2, $3, $4) RETURNING id', [
      accountId,
      hashKey(key),
      prefix,
      now,
    ]);
    return { key, prefix, id: r.rows[0]!.id };
  }

  async listKeys(accountName: string): Promise<KeyInfo[]> {
    const row = await this.row(accountName);
    const r = await this.#c.conn.q<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = $1 ORDER BY k.id`,
      [row.id],
    );
    return r.rows.map(toKeyInfo);
  }

  async revokeKey(prefix: string, now: Date): Promise<{ prefix: string; account: string; alreadyRevoked: boolean }> {
    const lookup = keyLookup(prefix.trim());
    const keys = `SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id`;
    let key: KeyRow;
    if (lookup.kind === 'whole') {
      const r = await this.#c.conn.q<KeyRow>(`${keys} WHERE k.hash = $1`, [hashKey(lookup.key)]);
      if (!r.rows[0]) throw new StoreError('unknown_key', 'no key matches that key');
      key = r.rows[0];
    } else {
      // A range, as in SQLite: '~' sorts after every base62 character (prefix is COLLATE "C").
      const r = await this.#c.conn.q<KeyRow>(`${keys} WHERE k.prefix >= $1 AND k.prefix < $2 ORDER BY k.id`, [lookup.prefix, `${lookup.prefix}~`]);
      key = pickByPrefix(
        r.rows.map((k) => ({ ...k, revoked: k.revoked_at !== null })),
        lookup.shown,
      );
    }
    const u = await this.#c.conn.q('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, key.id]);
    this.#c.forgetKeys();
    return { prefix: key.prefix, account: key.account, alreadyRevoked: u.rowCount !== 1 };
  }

  async usage(accountName: string, month: string | undefined, now: Date): Promise<Usage> {
    const m = month === undefined ? monthOf(now) : parseMonth(month);
    const { id } = await this.row(accountName);
    // `holds`: the counts of owners from before the hold rows (schema 4); a refunded row marks a unit given back.
    const h = await this.#c.conn.q<{ operation: Operation; n: number }>(
      `SELECT operation, sum(n)::bigint AS n FROM (
         SELECT operation, n FROM holds WHERE account_id = $1 AND month = $2
         UNION ALL SELECT operation, 1 FROM reservations WHERE account_id = $1 AND month = $2 AND NOT refunded
       ) h GROUP BY operation`,
      [id, m],
    );
    const [protect, verify] = await Promise.all([this.#c.state(id, 'protect', m, now), this.#c.state(id, 'verify', m, now)]);
    return usageOf(m, protect, verify, h.rows);
  }

  /** The account named `name` (names ignore case), or unknown_account. */
  async row(name: string): Promise<AccountRow> {
    const r = await this.#c.conn.q<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts a WHERE lower(a.name) = lower($1)`, [name]);
    if (!r.rows[0]) throw unknownAccount(name);
    return r.rows[0];
  }
}
