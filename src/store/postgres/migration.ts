/**
 * The PostgreSQL engine's part of `optmark store migrate`: its rows read in one REPEATABLE READ
 * transaction, and a snapshot written in one, a few thousand rows per statement (../snapshot.ts makes
 * and checks the snapshot for both engines). Public keys are added to those there; secrets replace those
 * of the same name.
 */
import type pg from 'pg';
import { RECORD_COLUMNS } from '../records.js';
import { SNAPSHOT_SQL, checkRestorable, shapeSnapshot, snapshotCounters, wantedMonths } from '../snapshot.js';
import type { StoreCounts, StoreSnapshot } from '../types.js';
import type { PgConnection } from './connection.js';
import { KEYS_CHANNEL } from './secrets.js';

/** Units of counter `u` held: hold rows not marked refunded (a mark is a unit given back after its commit) and the counts of owners from before them. */
const HELD = `coalesce((SELECT sum(n) FROM holds h WHERE h.account_id = u.account_id AND h.month = u.month AND h.operation = u.operation), 0)
  + (SELECT count(*) FROM reservations r WHERE r.account_id = u.account_id AND r.month = u.month AND r.operation = u.operation AND NOT r.refunded)`;

export async function pgCounts(conn: PgConnection): Promise<StoreCounts> {
  const r = await conn.q<StoreCounts>(
    `SELECT (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM api_keys) AS keys,
            (SELECT count(*) FROM usage_counters) AS counters, (SELECT count(*) FROM dashboard_batches) AS batches,
            (SELECT count(*) FROM dashboard_records) AS records, (SELECT count(*) FROM signing_keys) AS "publicKeys",
            (SELECT count(*) FROM secrets) AS secrets`,
  );
  return r.rows[0]!;
}

export async function pgSnapshot(conn: PgConnection, months?: string[]): Promise<StoreSnapshot> {
  const wanted = wantedMonths(months);
  return conn.tx(async (c) => {
    await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    const all = async <R extends pg.QueryResultRow>(sql: string) => (await c.query<R>(sql)).rows;
    return shapeSnapshot(
      {
        accounts: await all(SNAPSHOT_SQL.accounts),
        keys: await all(SNAPSHOT_SQL.keys),
        counters: await all(snapshotCounters(HELD)),
        batches: await all(SNAPSHOT_SQL.batches),
        records: await all(SNAPSHOT_SQL.records),
        publicKeys: await all('SELECT key_id, public_pem, recorded_at FROM signing_keys ORDER BY recorded_at, key_id'),
        secrets: await all('SELECT name, value FROM secrets ORDER BY name'),
      },
      wanted,
    );
  });
}

export async function pgRestore(conn: PgConnection, s: StoreSnapshot): Promise<void> {
  checkRestorable(s);
  await conn.tx(async (c) => {
    await c.query('SET LOCAL synchronous_commit = on');
    await c.query(
      'TRUNCATE scan_items, scan_chunks, scans, vault_reservations, vault_objects, vault_accounts, dashboard_records, dashboard_batches, idempotency_keys, reservations, holds, usage_counters, api_keys, accounts RESTART IDENTITY',
    );
    // Rows go in as JSON arrays, a few thousand per statement; accounts are matched by name.
    await insertRows(
      c,
      `INSERT INTO accounts (name, plan, protect_limit, verify_limit, created_at)
         SELECT x.name, x.plan, x.protect_limit, x.verify_limit, x.created_at
           FROM json_to_recordset($1::json) AS x(n int, name text, plan text, protect_limit bigint, verify_limit bigint, created_at timestamptz) ORDER BY x.n`,
      s.accounts.map((a, n) => ({ n, name: a.name, plan: a.plan, protect_limit: a.protectLimit, verify_limit: a.verifyLimit, created_at: a.createdAt })),
    );
    const byName = 'JOIN accounts a ON lower(a.name) = lower(x.account)';
    await insertRows(
      c,
      `INSERT INTO api_keys (account_id, hash, prefix, created_at, last_used_at, revoked_at)
         SELECT a.id, decode(x.hash, 'hex'), x.prefix, x.created_at, x.last_used_at, x.revoked_at
           FROM json_to_recordset($1::json) AS x(n int, account text, hash text, prefix text, created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz)
           ${byName} ORDER BY x.n`,
      s.keys.map((k, n) => ({
        n,
        account: k.account,
        hash: k.hash.toString('hex'),
        prefix: k.prefix,
        created_at: k.createdAt,
        last_used_at: k.lastUsedAt,
        revoked_at: k.revokedAt,
      })),
    );
    await insertRows(
      c,
      `INSERT INTO usage_counters (account_id, month, operation, used)
         SELECT a.id, x.month, x.operation, x.used FROM json_to_recordset($1::json) AS x(account text, month text, operation text, used bigint) ${byName}`,
      s.counters,
    );
    await insertRows(
      c,
      `INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, tdmrep, content_credentials, used, created_at)
         SELECT x.id, a.id, x."keyPrefix", x.size, x.provenance, x.fingerprint, coalesce(x.tdmrep, false), coalesce(x."contentCredentials", false), x.used, x."createdAt"
           FROM json_to_recordset($1::json) AS x(account text, id text, "keyPrefix" text, size int, provenance boolean, fingerprint boolean,
                tdmrep boolean, "contentCredentials" boolean, used int, "createdAt" text)
           ${byName}`,
      s.batches,
    );
    await insertRows(
      c,
      `INSERT INTO dashboard_records (id, account_id, ${RECORD_COLUMNS.slice(4)})
         SELECT x.id, a.id, x."batchId", x.sha256, x."originalName", x."producedName", x."mimeType", x.bytes, x.layers, x."keyPrefix",
                x."provenanceKeyId", x."markedAt"
           FROM json_to_recordset($1::json) AS x(account text, id text, "batchId" text, sha256 text, "originalName" text, "producedName" text,
                "mimeType" text, bytes bigint, layers text, "keyPrefix" text, "provenanceKeyId" text, "markedAt" text)
           ${byName}`,
      s.records.map((r) => ({ ...r, layers: r.layers.join(',') })),
    );
    let recorded = 0;
    for (const k of s.publicKeys) {
      const r = await c.query('INSERT INTO signing_keys (key_id, public_pem, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING', [
        k.keyId,
        k.pem,
        k.recordedAt,
      ]);
      recorded += r.rowCount ?? 0;
    }
    if (recorded > 0) await c.query('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, 'restore']);
    for (const x of s.secrets) {
      await c.query(
        'INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO UPDATE SET value = excluded.value, created_at = excluded.created_at',
        [x.name, x.value],
      );
    }
  });
}

/** Rows per INSERT of a restore. */
const RESTORE_CHUNK = 2000;

/** Runs `sql` (whose $1 is a JSON array of rows) over `rows`, a chunk at a time. */
async function insertRows(c: pg.PoolClient, sql: string, rows: readonly object[]): Promise<void> {
  for (let i = 0; i < rows.length; i += RESTORE_CHUNK) await c.query(sql, [JSON.stringify(rows.slice(i, i + RESTORE_CHUNK))]);
}
