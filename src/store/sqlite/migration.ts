/**
 * The SQLite engine's part of `optmark store migrate`: its rows read in one transaction, and a snapshot
 * written in one (../snapshot.ts makes and checks the snapshot for both engines). Public keys and shared
 * secrets are the data directory's files, not rows: a snapshot has none, and a restore leaves them.
 */
import type { Db } from '../db.js';
import { unknownAccount } from '../common.js';
import { RECORD_COLUMNS, recordValues } from '../records.js';
import { SNAPSHOT_SQL, checkRestorable, shapeSnapshot, snapshotCounters, wantedMonths, type SnapshotRows } from '../snapshot.js';
import type { Plan, StoreCounts, StoreSnapshot } from '../types.js';

/** Units of counter `u` held: hold rows (each is one) and the counts of owners from before them. */
const HELD = `coalesce((SELECT sum(n) FROM holds h WHERE h.account_id = u.account_id AND h.month = u.month AND h.operation = u.operation), 0)
  + (SELECT count(*) FROM reservations r WHERE r.account_id = u.account_id AND r.month = u.month AND r.operation = u.operation)`;

export function sqliteCounts(db: Db): StoreCounts {
  const row = db
    .prepare<[], Omit<StoreCounts, 'publicKeys' | 'secrets'>>(
      `SELECT (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM api_keys) AS keys,
              (SELECT count(*) FROM usage_counters) AS counters, (SELECT count(*) FROM dashboard_batches) AS batches,
              (SELECT count(*) FROM dashboard_records) AS records`,
    )
    .get()!;
  return { ...row, publicKeys: 0, secrets: 0 };
}

export function sqliteSnapshot(db: Db, months?: string[]): StoreSnapshot {
  const wanted = wantedMonths(months);
  return db
    .transaction((): StoreSnapshot => {
      const all = <R>(sql: string) => db.prepare<[], R>(sql).all();
      const rows: SnapshotRows = {
        accounts: all(SNAPSHOT_SQL.accounts),
        keys: all(SNAPSHOT_SQL.keys),
        counters: all(snapshotCounters(HELD)),
        batches: all(SNAPSHOT_SQL.batches),
        records: all(SNAPSHOT_SQL.records),
        publicKeys: [],
        secrets: [],
      };
      return shapeSnapshot(rows, wanted);
    })
    .deferred();
}

export function sqliteRestore(db: Db, s: StoreSnapshot): void {
  checkRestorable(s);
  db.transaction(() => {
    db.exec(
      'DELETE FROM vault_reservations; DELETE FROM vault_objects; DELETE FROM vault_accounts; DELETE FROM dashboard_records; DELETE FROM dashboard_batches; DELETE FROM reservations; DELETE FROM holds; DELETE FROM usage_counters; DELETE FROM api_keys; DELETE FROM accounts;',
    );
    const ids = new Map<string, number>();
    const idOf = (name: string): number => {
      const id = ids.get(name.toLowerCase());
      if (id === undefined) throw unknownAccount(name);
      return id;
    };
    const insA = db.prepare<[string, Plan, number | null, number | null, string], { id: number }>(
      'INSERT INTO accounts (name, plan, protect_limit, verify_limit, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
    );
    for (const a of s.accounts) ids.set(a.name.toLowerCase(), insA.all(a.name, a.plan, a.protectLimit, a.verifyLimit, a.createdAt)[0]!.id);
    const insK = db.prepare('INSERT INTO api_keys (account_id, hash, prefix, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)');
    for (const k of s.keys) insK.run(idOf(k.account), k.hash, k.prefix, k.createdAt, k.lastUsedAt, k.revokedAt);
    const insC = db.prepare('INSERT INTO usage_counters (account_id, month, operation, used) VALUES (?, ?, ?, ?)');
    for (const c of s.counters) insC.run(idOf(c.account), c.month, c.operation, c.used);
    const insB = db.prepare(
      'INSERT INTO dashboard_batches (id, account_id, key_prefix, size, provenance, fingerprint, tdmrep, content_credentials, used, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    // A snapshot from before the signal layers has no tdmrep or contentCredentials: off, as the schema's defaults.
    for (const b of s.batches) {
      const flags = [b.provenance, b.fingerprint, b.tdmrep, b.contentCredentials].map((f) => (f ? 1 : 0));
      insB.run(b.id, idOf(b.account), b.keyPrefix, b.size, ...flags, b.used, b.createdAt);
    }
    const insR = db.prepare(`INSERT INTO dashboard_records (id, account_id, ${RECORD_COLUMNS.slice(4)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    for (const r of s.records) insR.run(...recordValues(idOf(r.account), r));
  }).immediate();
}
