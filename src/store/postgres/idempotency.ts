/**
 * The PostgreSQL engine's idempotency-key statements (src/store/idempotency.ts). The key changes in the
 * very statement that takes, commits or gives back its unit: a keyed commit is the engine's commit with
 * one more CTE, so it stays one statement written to the connection before the answer's last byte.
 */

/**
 * `sql` (a statement that starts with WITH) with `cte` run first in the same statement. Throws when the
 * statement has no WITH: a keyed variant must never silently lose its key.
 */
export function withKey(sql: string, cte: string): string {
  const m = /^\s*WITH\s/.exec(sql);
  if (!m) throw new Error('a keyed statement extends a WITH statement');
  return `WITH ${cte},\n${sql.slice(m[0].length)}`;
}

/**
 * Takes the key and, only if it was taken, one unit and this instance's hold of it: $1 account, $2 month,
 * $3 operation, $4 default limit, $5 owner, $6 key, $7 now and $8 expiry (epoch ms), $9 the hold id. `limit` is the
 * effective limit of $3 for account row `a`. A key this account already has (unexpired) takes nothing:
 * `keyed` is 0 and prior_* describe the row (null when another request took it during this statement).
 * Over the limit, the key was taken without a unit (`keyed` 1, `used` null): DROP_KEY gives it back.
 * `takeUnit(guard)` is the engine's own unit-and-hold part of a reservation (CTEs `c` and `h`), taken
 * only where `guard` holds.
 */
export function reserveKeyed(limit: string, takeUnit: (guard: string, hold: string) => string): string {
  return `
  WITH lim AS (SELECT a.id, ${limit} AS lim FROM accounts a WHERE a.id = $1),
  prior AS (SELECT state, operation, sha256 FROM idempotency_keys WHERE account_id = $1 AND idem_key = $6::text AND expires_at > $7::bigint),
  k AS (
    INSERT INTO idempotency_keys AS i (account_id, idem_key, operation, owner, state, sha256, expires_at)
      SELECT id, $6::text, $3::text, $5::text, 'held', NULL, $8::bigint FROM lim
    ON CONFLICT (account_id, idem_key) DO UPDATE
      SET operation = excluded.operation, owner = excluded.owner, state = 'held', sha256 = NULL, expires_at = excluded.expires_at
      WHERE i.expires_at <= $7::bigint
    RETURNING 1
  ),
  ${takeUnit('lim.lim > 0 AND EXISTS (SELECT 1 FROM k)', '$9')}
  SELECT (SELECT lim FROM lim) AS lim, (SELECT used FROM c) AS used, (SELECT count(*) FROM k)::int AS keyed,
         p.state AS prior_state, p.operation AS prior_operation, p.sha256 AS prior_sha256
    FROM (SELECT 1) one LEFT JOIN prior p ON true`;
}

/** A key taken by this owner ($3) for a unit it did not get: $1 account, $2 key. */
export const DROP_KEY = `DELETE FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2 AND owner = $3 AND state = 'held'`;

/** Added to the commit ($1 owner, $2 account): the key $8 committed with the upload's SHA-256 $9, kept until $10 (epoch ms). */
export const KEY_COMMITTED = `k AS (
    UPDATE idempotency_keys SET state = 'committed', sha256 = $9::text, expires_at = $10::bigint
     WHERE account_id = $2 AND idem_key = $8::text AND owner = $1::text AND state = 'held'
  )`;

/**
 * In the refund ($1 owner, $2 account), after `h` and `m` (the unit given back now): the key $9 goes with
 * its unit. A refund sent again finds its unit given back already and leaves the key alone (a retry of
 * the client's may have taken it again meanwhile).
 */
export const KEY_REFUNDED = `k AS (
    DELETE FROM idempotency_keys
     WHERE account_id = $2 AND idem_key = $9::text AND owner = $1::text AND (EXISTS (SELECT 1 FROM h) OR EXISTS (SELECT 1 FROM m))
  )`;

/** Added to a dead owner's release ($1): the keys of the units it held go with them. */
export const KEYS_RELEASED = `k AS (DELETE FROM idempotency_keys WHERE owner = $1 AND state = 'held')`;

/** Committed keys expired by $1 (epoch ms). */
export const PRUNE_KEYS = `DELETE FROM idempotency_keys WHERE expires_at <= $1 AND state = 'committed'`;
