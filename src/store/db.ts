/**
 * Opens the SQLite file and brings its schema up to date.
 *
 * WAL lets the operator commands read and write while the server runs (readers never block the writer,
 * writers queue on the busy timeout). synchronous=NORMAL skips the fsync at each commit: a commit is in
 * the WAL file, hence in the OS page cache, when the statement returns, so it survives `kill -9` of the
 * process; only an OS crash or power loss can drop the commits since the last checkpoint. That trade
 * takes a counter write from ~1 ms (fsync) to a few microseconds.
 */
import { makePrivateDir, makePrivateFile } from '../datadir.js';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError } from './errors.js';

export type Db = Database.Database;

/** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * Schema migrations; entry i takes user_version i to i + 1. Append only: never edit a shipped entry.
 * Times are ISO-8601 UTC text (sortable, readable in the sqlite3 shell). Limit columns are NULL while
 * the account uses the configured defaults, so changing OPTMARK_DEFAULT_*_LIMIT applies to them.
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL COLLATE NOCASE UNIQUE,
    plan          TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'lifetime')),
    protect_limit INTEGER CHECK (protect_limit >= 0),
    verify_limit  INTEGER CHECK (verify_limit >= 0),
    created_at    TEXT NOT NULL
  ) STRICT;

  CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    hash         BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
    prefix       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
  ) STRICT;
  CREATE INDEX api_keys_account ON api_keys (account_id);
  CREATE INDEX api_keys_prefix ON api_keys (prefix);

  CREATE TABLE usage_counters (
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month      TEXT NOT NULL,
    operation  TEXT NOT NULL CHECK (operation IN ('protect', 'verify')),
    used       INTEGER NOT NULL CHECK (used >= 0),
    PRIMARY KEY (account_id, month, operation)
  ) STRICT, WITHOUT ROWID;
  `,
  // 2: reservations carry their owner. usage_counters.used keeps counting every unit taken (held or
  // committed), so the limit check stays one row; holds says how many of them each instance holds, and
  // owners when its lease ends and which process it is, so the units of a dead instance are given back.
  `
  CREATE TABLE owners (
    id         TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    started    TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;

  CREATE TABLE holds (
    owner      TEXT NOT NULL,
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month      TEXT NOT NULL,
    operation  TEXT NOT NULL CHECK (operation IN ('protect', 'verify')),
    n          INTEGER NOT NULL CHECK (n >= 0),
    PRIMARY KEY (owner, account_id, month, operation)
  ) STRICT, WITHOUT ROWID;
  `,
  // 3: the dashboard's batches (at most 25 images each, enforced by the slot counter) and the dated
  // records of what it marked (src/store/sqlite/records.ts).
  `
  CREATE TABLE dashboard_batches (
    id          TEXT PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_prefix  TEXT NOT NULL,
    size        INTEGER NOT NULL CHECK (size BETWEEN 1 AND 25),
    provenance  INTEGER NOT NULL CHECK (provenance IN (0, 1)),
    fingerprint INTEGER NOT NULL CHECK (fingerprint IN (0, 1)),
    used        INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0 AND used <= size),
    created_at  TEXT NOT NULL
  ) STRICT;
  CREATE INDEX dashboard_batches_account ON dashboard_batches (account_id, created_at);

  CREATE TABLE dashboard_records (
    id                TEXT PRIMARY KEY,
    account_id        INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    batch_id          TEXT NOT NULL,
    sha256            TEXT NOT NULL CHECK (length(sha256) = 64),
    original_name     TEXT NOT NULL,
    produced_name     TEXT NOT NULL,
    mime_type         TEXT NOT NULL,
    bytes             INTEGER NOT NULL,
    layers            TEXT NOT NULL,
    key_prefix        TEXT NOT NULL,
    provenance_key_id TEXT,
    marked_at         TEXT NOT NULL
  ) STRICT;
  CREATE INDEX dashboard_records_account ON dashboard_records (account_id, marked_at);
  CREATE INDEX dashboard_records_sha256 ON dashboard_records (sha256);
  CREATE INDEX dashboard_records_batch ON dashboard_records (batch_id);
  `,
  // 4: Idempotency-Key (src/store/idempotency.ts): taken 'held' by an owner with its unit, 'committed'
  // with the upload's SHA-256 in the transaction that commits the unit; expires_at in epoch ms.
  `
  CREATE TABLE idempotency_keys (
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    idem_key   TEXT NOT NULL,
    operation  TEXT NOT NULL CHECK (operation IN ('protect', 'verify')),
    owner      TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('held', 'committed')),
    sha256     TEXT CHECK (sha256 IS NULL OR length(sha256) = 64),
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, idem_key)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  CREATE INDEX idempotency_keys_owner ON idempotency_keys (owner);
  `,
  // 5: a hold per reservation (owner, id), instead of a count per owner and counter in \`holds\`: a
  // commit or refund acts on its own reservation's row only (with a count, a commit of a reservation an
  // instance lost with its lease took the unit of a newer one). \`holds\` stays for processes of an
  // optmark before this one still open on the file (a rolling restart): every process of this version
  // gives back the rows of both tables of a dead owner.
  `
  CREATE TABLE reservations (
    owner      TEXT NOT NULL,
    id         INTEGER NOT NULL,
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month      TEXT NOT NULL,
    operation  TEXT NOT NULL CHECK (operation IN ('protect', 'verify')),
    PRIMARY KEY (owner, id)
  ) STRICT, WITHOUT ROWID;
  `,
  // 6: the dashboard's signal layers (docs/signals.md) beside provenance and fingerprint; a batch opened
  // before them had neither, which is what the defaults say.
  `
  ALTER TABLE dashboard_batches ADD COLUMN tdmrep INTEGER NOT NULL DEFAULT 0 CHECK (tdmrep IN (0, 1));
  ALTER TABLE dashboard_batches ADD COLUMN content_credentials INTEGER NOT NULL DEFAULT 0 CHECK (content_credentials IN (0, 1));
  `,
  // 7: the Private Vault (src/vault/rows.ts): the account's vault, its objects (content-addressed per
  // account) and the bytes reserved for writes in progress.
  `
  CREATE TABLE vault_accounts (
    account_id  INTEGER PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    enabled     INTEGER NOT NULL DEFAULT 0 CHECK (enabled IN (0, 1)),
    limit_bytes INTEGER CHECK (limit_bytes IS NULL OR limit_bytes >= 0),
    used_bytes  INTEGER NOT NULL DEFAULT 0,
    wrapped_key TEXT
  ) STRICT;
  CREATE TABLE vault_objects (
    id          TEXT PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    sha256      TEXT NOT NULL CHECK (length(sha256) = 64),
    bytes       INTEGER NOT NULL CHECK (bytes >= 0),
    mime_type   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('original', 'marked')),
    record_id   TEXT,
    storage_key TEXT NOT NULL UNIQUE,
    phash       TEXT,
    UNIQUE (account_id, sha256)
  ) STRICT;
  CREATE INDEX vault_objects_account ON vault_objects (account_id, created_at, id);
  CREATE INDEX vault_objects_record ON vault_objects (record_id);
  CREATE TABLE vault_reservations (
    id         TEXT PRIMARY KEY,
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    expires_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX vault_reservations_account ON vault_reservations (account_id);
`,
  // 8: repository scans (src/scans/jobs/, docs/scans.md): the scan, its chunks under leases, its items
  // (one per index), and the daily counters (scope 'account:<id>' or 'service', per UTC day).
  `
  CREATE TABLE scans (
    id          TEXT PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    source      TEXT NOT NULL,
    options     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'paused', 'running', 'done', 'failed', 'cancelled')),
    created_at  INTEGER NOT NULL,
    started_at  INTEGER,
    finished_at INTEGER,
    progress    INTEGER NOT NULL DEFAULT 0,
    counts      TEXT NOT NULL,
    error       TEXT
  ) STRICT;
  CREATE INDEX scans_account ON scans (account_id, created_at, id);
  CREATE INDEX scans_state ON scans (state, created_at);
  CREATE TABLE scan_chunks (
    scan_id     TEXT NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    k           INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1)),
    PRIMARY KEY (scan_id, k)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX scan_chunks_open ON scan_chunks (done, lease_until);
  CREATE TABLE scan_items (
    scan_id TEXT NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    idx     INTEGER NOT NULL,
    item    TEXT NOT NULL,
    PRIMARY KEY (scan_id, idx)
  ) STRICT, WITHOUT ROWID;
  CREATE TABLE scan_days (
    scope   TEXT NOT NULL,
    day     TEXT NOT NULL,
    started INTEGER NOT NULL,
    PRIMARY KEY (scope, day)
  ) STRICT, WITHOUT ROWID;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Opens (creating if needed) the database file with the pragmas the store relies on, migrated to SCHEMA_VERSION. */
export function openDatabase(file: string, busyTimeoutMs: number = BUSY_TIMEOUT_MS): Db {
  if (file !== ':memory:') {
    // Key hashes and usage are for the service's user only: the directory 0700, the file 0600 (SQLite
    // gives -wal and -shm the database file's mode).
    makePrivateDir(dirname(file));
    makePrivateFile(file);
  }
  const db = new Database(file, { timeout: busyTimeoutMs });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    migrate(db);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

function userVersion(db: Db): number {
  return db.pragma('user_version', { simple: true }) as number;
}

function migrate(db: Db): void {
  const seen = userVersion(db);
  if (seen > SCHEMA_VERSION) {
    throw new StoreError('schema_too_new', `the database has schema version ${seen}, newer than this optmark understands (${SCHEMA_VERSION}); upgrade optmark`);
  }
  if (seen === SCHEMA_VERSION) return;
  // IMMEDIATE takes the write lock first, so two processes starting on a fresh file cannot both migrate;
  // the version is read again under the lock for the one that waited.
  db.transaction(() => {
    for (let v = userVersion(db); v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
