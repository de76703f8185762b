/**
 * The PostgreSQL engine's single-call statements: a reservation's unit and hold, its commit, a keyed
 * refund, the release of a dead owner's holds and the reconciliation's search for owners nobody
 * registered. The batch forms of reserve, commit and refund are ./batch.ts; the idempotency-key parts
 * ./idempotency.ts.
 */
import { KEYS_RELEASED, KEY_COMMITTED, KEY_REFUNDED, reserveKeyed, withKey } from './idempotency.js';

/** The effective limit of operation $op for account `a`, with $fallback the configured default. */
export const limitOf = (op: string, fallback: string) =>
  `coalesce(CASE ${op}::text WHEN 'protect' THEN a.protect_limit ELSE a.verify_limit END, ${fallback}::bigint)`;

// A reservation alone in its turn (the batch statement of ./batch.ts does the same for many, at about
// three times the execution cost of this one).
/**
 * One unit of $3 for account $1 in month $2 (counter `c`, never past the limit in `lim`) and its hold row
 * (owner $5, id `hold`: `h`), taken only when `guard` (a condition on `lim`) holds too: the part of a
 * reservation that RESERVE and the keyed reservation (./idempotency.ts) share.
 */
const takeUnit = (guard: string, hold: string) => `c AS (
    INSERT INTO usage_counters AS u (account_id, month, operation, used)
      SELECT id, $2::text, $3::text, 1 FROM lim WHERE ${guard}
    ON CONFLICT (account_id, month, operation) DO UPDATE SET used = u.used + 1
      WHERE u.used < (SELECT lim FROM lim)
    RETURNING u.used
  ),
  h AS (
    INSERT INTO reservations (owner, id, account_id, month, operation) SELECT $5::text, ${hold}::bigint, $1, $2::text, $3::text FROM c RETURNING 1
  )`;

export const RESERVE = `
  WITH lim AS (SELECT a.id, ${limitOf('$3', '$4')} AS lim FROM accounts a WHERE a.id = $1),
  ${takeUnit('lim.lim > 0', '$6')}
  SELECT c.used, (SELECT lim FROM lim) AS lim, (SELECT count(*) FROM h)::int AS held FROM c`;

export const STATE_OF = (month: string) => `
  SELECT ${limitOf('$4', '$6')} AS lim,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = a.id AND u.month = ${month}::text AND u.operation = $4::text), 0) AS used
    FROM accounts a WHERE a.id = $2`;

// $7: the reservation's hold id. Its row goes (once: sent again, the statement finds nothing).
export const COMMIT = `
  WITH h AS (
    DELETE FROM reservations
     WHERE owner = $1::text AND id = $7::bigint AND account_id = $2 AND month = $3::text AND operation = $4::text AND NOT refunded RETURNING 1
  ),
  s AS (${STATE_OF('$5')})
  SELECT (SELECT count(*) FROM h)::int AS released, s.lim, s.used FROM s`;

// $7: the unit is still held (its row $8 goes, and the unit off the counter only if the row was there);
// false: it was committed (its row is marked refunded, and the unit off the counter only if it was not
// marked yet). As REFUND_BATCH (./batch.ts) for one call: sent again, it changes nothing. Only keyed
// refunds use it (others go through the batch): the key $9 goes with its unit (./idempotency.ts).
export const REFUND_KEYED = `
  WITH h AS (
    DELETE FROM reservations
     WHERE $7::boolean AND owner = $1::text AND id = $8::bigint AND account_id = $2 AND month = $3::text AND operation = $4::text AND NOT refunded
    RETURNING 1
  ),
  m AS (
    INSERT INTO reservations AS r (owner, id, account_id, month, operation, refunded)
      SELECT $1::text, $8::bigint, $2, $3::text, $4::text, true WHERE NOT $7::boolean
    ON CONFLICT (id, owner) DO UPDATE SET refunded = true WHERE NOT r.refunded
    RETURNING 1
  ),
  c AS (
    UPDATE usage_counters SET used = used - 1
     WHERE account_id = $2 AND month = $3::text AND operation = $4::text AND used > 0
       AND (EXISTS (SELECT 1 FROM h) OR EXISTS (SELECT 1 FROM m)) RETURNING used
  ),
  ${KEY_REFUNDED},
  s AS (${STATE_OF('$5')})
  SELECT s.lim, s.used, (SELECT used FROM c) AS after, ($3::text = $5::text) AS same_month FROM s`;

// Everything a dead owner held goes back to its counters and its rows go, with its held idempotency
// keys, in one statement. Two reconcilers racing on one owner: the second waits on the row locks and
// then finds nothing to delete. `holds` has the counts of owners of an optmark before the hold rows
// (schema 4), during a rolling upgrade.
export const RELEASE_OWNER = withKey(
  `
  WITH o AS (DELETE FROM owners WHERE id = $1),
  ho AS (DELETE FROM holds WHERE owner = $1 RETURNING account_id, month, operation, n),
  r AS (DELETE FROM reservations WHERE owner = $1 RETURNING account_id, month, operation, refunded),
  h AS (
    SELECT account_id, month, operation, sum(n) AS n
      FROM (SELECT account_id, month, operation, n FROM ho UNION ALL SELECT account_id, month, operation, 1 FROM r WHERE NOT refunded) z
     GROUP BY account_id, month, operation
  ),
  u AS (
    UPDATE usage_counters c SET used = greatest(0, c.used - h.n) FROM h
     WHERE c.account_id = h.account_id AND c.month = h.month AND c.operation = h.operation RETURNING h.n
  )
  SELECT coalesce(sum(n), 0)::bigint AS units FROM u`,
  KEYS_RELEASED,
);

/**
 * The reconciliation's search for hold rows of unregistered owners: one probe of the owner index per gap
 * between the owners known (sorted as the column's "C" collation sorts them, byte by byte), each the first
 * row inside it. A probe never walks a known owner's rows, the dead ones its commits leave until VACUUM
 * included, so its cost is the number of owners, not the table's size (`NOT IN (SELECT id FROM owners)`
 * read every row). $1/$2: the bounded gaps; $3: the last owner (the gap above it).
 */
export const ORPHAN_OWNERS = `
  SELECT r.owner FROM unnest($1::text[], $2::text[]) AS g(lo, hi)
   CROSS JOIN LATERAL (SELECT owner FROM reservations WHERE owner > g.lo COLLATE "C" AND owner < g.hi COLLATE "C" ORDER BY owner LIMIT 1) r
  UNION ALL
  (SELECT owner FROM reservations WHERE owner > $3::text COLLATE "C" ORDER BY owner LIMIT 1)`;

/** ORPHAN_OWNERS' parameters for `known`: the gaps below, between and above them. */
export function ownerGaps(known: Iterable<string>): { lo: string[]; hi: string[]; last: string } {
  const sorted = [...known].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return { lo: ['', ...sorted.slice(0, -1)], hi: sorted, last: sorted.at(-1) ?? '' };
}

// The same with the reservation's Idempotency-Key (./idempotency.ts).
export const RESERVE_KEYED = reserveKeyed(limitOf('$3', '$4'), takeUnit);
export const COMMIT_KEYED = withKey(COMMIT, KEY_COMMITTED);

/** The counter of operation $2 in month $4 for account $1, with $3 the configured default. */
export const STATE = `
  SELECT ${limitOf('$2', '$3')} AS lim,
         coalesce((SELECT used FROM usage_counters u WHERE u.account_id = a.id AND u.month = $4 AND u.operation = $2::text), 0) AS used
    FROM accounts a WHERE a.id = $1`;

/** Deletes the marks of committed units given back ($1 owners, $2 hold ids) once their refund was answered. */
export const DROP_MARKERS =
  'DELETE FROM reservations r USING unnest($1::text[], $2::bigint[]) AS m(owner, id) WHERE r.owner = m.owner AND r.id = m.id AND r.refunded';
