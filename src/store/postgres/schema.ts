/**
 * The PostgreSQL schema as versioned, append-only migrations, applied at start under an advisory lock so
 * that N instances starting together migrate once. An instance refuses a schema newer than it knows.
 */
import type { PoolClient } from 'pg';
import { StoreError } from '../errors.js';

/**
 * Entry i takes the schema from version i to i + 1. Append only: never edit a shipped entry. Each runs in
 * a transaction of its own together with the row that records it.
 */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL,
    plan          text NOT NULL CHECK (plan IN ('free', 'pro', 'lifetime')),
    protect_limit bigint CHECK (protect_limit >= 0),
    verify_limit  bigint CHECK (verify_limit >= 0),
    created_at    timestamptz NOT NULL
  );
  -- names ignore case, as in SQLite's COLLATE NOCASE
  CREATE UNIQUE INDEX accounts_name ON accounts (lower(name));

  CREATE TABLE api_keys (
    id           integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    hash         bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
    prefix       text NOT NULL COLLATE "C",
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
  );
  CREATE INDEX api_keys_account ON api_keys (account_id);
  CREATE INDEX api_keys_prefix ON api_keys (prefix);

  -- used counts every unit taken this month, held or committed: the limit check is this one row.
  CREATE TABLE usage_counters (
    account_id integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month      text NOT NULL,
    operation  text NOT NULL CHECK (operation IN ('protect', 'verify')),
    used       bigint NOT NULL CHECK (used >= 0),
    PRIMARY KEY (account_id, month, operation)
  );

  -- The instances that hold units, with their lease and (for same-host liveness checks) their process.
  CREATE TABLE owners (
    id         text PRIMARY KEY,
    host       text NOT NULL,
    pid        integer NOT NULL,
    started    text NOT NULL,
    expires_at bigint NOT NULL
  );

  -- How many of a counter's units each instance holds (taken, not yet committed or refunded).
  CREATE TABLE holds (
    owner      text NOT NULL,
    account_id integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    month      text NOT NULL,
    operation  text NOT NULL,
    n          bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (owner, account_id, month, operation)
  );
  CREATE INDEX holds_counter ON holds (account_id, month, operation);

  -- Provenance public keys of every instance (the private keys stay with the operator).
  CREATE TABLE signing_keys (
    key_id      text PRIMARY KEY,
    public_pem  text NOT NULL,
    recorded_at timestamptz NOT NULL
  );

  -- Secrets every instance must share (the fingerprint key).
  CREATE TABLE secrets (
    name       text PRIMARY KEY,
    value      bytea NOT NULL,
    created_at timestamptz NOT NULL
  );
  `,
  // 2: the dashboard's batches and records (./records.ts). Times are ISO-8601 UTC text, as in SQLite.
  `
  CREATE TABLE dashboard_batches (
    id          text PRIMARY KEY,
    account_id  integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_prefix  text NOT NULL,
    size        integer NOT NULL CHECK (size BETWEEN 1 AND 25),
    provenance  boolean NOT NULL,
    fingerprint boolean NOT NULL,
    used        integer NOT NULL DEFAULT 0 CHECK (used >= 0 AND used <= size),
    created_at  text NOT NULL COLLATE "C"
  );
  CREATE INDEX dashboard_batches_account ON dashboard_batches (account_id, created_at);

  CREATE TABLE dashboard_records (
    id                text PRIMARY KEY,
    account_id        integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    batch_id          text NOT NULL,
    sha256            text NOT NULL COLLATE "C" CHECK (length(sha256) = 64),
    original_name     text NOT NULL,
    produced_name     text NOT NULL,
    mime_type         text NOT NULL,
    bytes             bigint NOT NULL,
    layers            text NOT NULL,
    key_prefix        text NOT NULL,
    provenance_key_id text,
    marked_at         text NOT NULL COLLATE "C"
  );
  CREATE INDEX dashboard_records_account ON dashboard_records (account_id, marked_at);
  CREATE INDEX dashboard_records_sha256 ON dashboard_records (sha256);
  CREATE INDEX dashboard_records_batch ON dashboard_records (batch_id);
  `,
  // 3: Idempotency-Key (src/store/idempotency.ts, ./idempotency.ts): taken 'held' by an owner with its
  // unit, 'committed' with the upload's SHA-256 in the statement that commits the unit; expires_at in epoch ms.
  `
  CREATE TABLE idempotency_keys (
    account_id integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    idem_key   text NOT NULL COLLATE "C",
    operation  text NOT NULL CHECK (operation IN ('protect', 'verify')),
    owner      text NOT NULL,
    state      text NOT NULL CHECK (state IN ('held', 'committed')),
    sha256     text CHECK (sha256 IS NULL OR length(sha256) = 64),
    expires_at bigint NOT NULL,
    PRIMARY KEY (account_id, idem_key)
  );
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  CREATE INDEX idempotency_keys_owner ON idempotency_keys (owner);
  `,
  // 4: a hold per reservation (owner, id), instead of a count per owner and counter in \`holds\`: a commit
  // or refund sent again after a cut connection finds its own row gone and changes nothing, where a count
  // took another reservation's unit. \`refunded\` marks a unit given back after its commit (the row a
  // re-sent refund finds). \`holds\` stays for instances not yet upgraded (a rolling upgrade): every
  // upgraded instance gives back the rows of both tables of a dead owner. No foreign key: its check would
  // lock the account row at every reservation (accounts are never deleted; a restore truncates this table).
  // The key starts with the id: commits and refunds look rows up by (id, owner) and never walk an owner's
  // deleted rows (a generic plan over an (owner, id) key read every row the owner had since the last vacuum).
  `
  CREATE TABLE reservations (
    owner      text NOT NULL COLLATE "C",
    id         bigint NOT NULL,
    account_id integer NOT NULL,
    month      text NOT NULL,
    operation  text NOT NULL,
    refunded   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (id, owner)
  );
  `,
  // 5: the reconciliation looks for hold rows whose owner is not registered (a rolling upgrade from before
  // 4) every second on every instance. Without an index on the owner that was a scan of the whole table,
  // dead rows included: every commit deletes a row, and until VACUUM (or while a long transaction such as
  // pg_dump holds the horizon back) a million dead rows cost the scan 270-370 ms, once a second per
  // instance. With it the search probes only the gaps between the registered owners (ORPHAN_OWNERS).
  `
  CREATE INDEX reservations_owner ON reservations (owner);
  `,
  // 6: the dashboard's signal layers (docs/signals.md) beside provenance and fingerprint; a batch opened
  // before them had neither, which is what the defaults say (a constant default: no table rewrite).
  `
  ALTER TABLE dashboard_batches
    ADD COLUMN tdmrep boolean NOT NULL DEFAULT false,
    ADD COLUMN content_credentials boolean NOT NULL DEFAULT false;
  `,
  // 7: the Private Vault (src/vault/rows.ts): the account's vault, its objects (content-addressed per
  // account) and the bytes reserved for writes in progress.
  `
  CREATE TABLE vault_accounts (
    account_id  integer PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    enabled     boolean NOT NULL DEFAULT false,
    limit_bytes bigint CHECK (limit_bytes IS NULL OR limit_bytes >= 0),
    used_bytes  bigint NOT NULL DEFAULT 0,
    wrapped_key text
  );
  CREATE TABLE vault_objects (
    id          text PRIMARY KEY,
    account_id  integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name        text NOT NULL,
    sha256      text NOT NULL CHECK (length(sha256) = 64),
    bytes       bigint NOT NULL CHECK (bytes >= 0),
    mime_type   text NOT NULL,
    created_at  text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('original', 'marked')),
    record_id   text,
    storage_key text NOT NULL UNIQUE,
    phash       text,
    UNIQUE (account_id, sha256)
  );
  CREATE INDEX vault_objects_account ON vault_objects (account_id, created_at, id);
  CREATE INDEX vault_objects_record ON vault_objects (record_id);
  CREATE TABLE vault_reservations (
    id         text PRIMARY KEY,
    account_id integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    bytes      bigint NOT NULL CHECK (bytes >= 0),
    expires_at timestamptz NOT NULL
  );
  CREATE INDEX vault_reservations_account ON vault_reservations (account_id);
`,
  // 8: repository scans (src/scans/jobs/, docs/scans.md): the scan, its chunks under leases (taken with
  // FOR UPDATE SKIP LOCKED), its items (one per index), and the daily counters (scope, UTC day).
  `
  CREATE TABLE scans (
    id          text PRIMARY KEY,
    account_id  integer NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    source      text NOT NULL,
    options     jsonb NOT NULL,
    state       text NOT NULL CHECK (state IN ('queued', 'paused', 'running', 'done', 'failed', 'cancelled')),
    created_at  bigint NOT NULL,
    started_at  bigint,
    finished_at bigint,
    progress    integer NOT NULL DEFAULT 0,
    counts      jsonb NOT NULL,
    error       jsonb
  );
  CREATE INDEX scans_account ON scans (account_id, created_at, id);
  CREATE INDEX scans_state ON scans (state, created_at);
  CREATE TABLE scan_chunks (
    scan_id     text NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    k           integer NOT NULL,
    lease_owner text,
    lease_until bigint NOT NULL DEFAULT 0,
    done        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (scan_id, k)
  );
  CREATE INDEX scan_chunks_open ON scan_chunks (lease_until) WHERE NOT done;
  CREATE TABLE scan_items (
    scan_id text NOT NULL REFERENCES scans (id) ON DELETE CASCADE,
    idx     integer NOT NULL,
    item    jsonb NOT NULL,
    PRIMARY KEY (scan_id, idx)
  );
  CREATE TABLE scan_days (
    scope   text NOT NULL,
    day     text NOT NULL,
    started integer NOT NULL,
    PRIMARY KEY (scope, day)
  );
  `,
];

export const PG_SCHEMA_VERSION = PG_MIGRATIONS.length;

/** Advisory lock key (first half): "optm". The second half is the schema's name hashed by PostgreSQL. */
const LOCK_CLASS = 0x6f70746d;

async function appliedVersion(client: PoolClient): Promise<number> {
  const t = await client.query<{ exists: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'optmark_schema') AS exists`,
  );
  if (!t.rows[0]!.exists) return 0;
  const r = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM optmark_schema');
  return Number(r.rows[0]!.v ?? 0);
}

function tooNew(seen: number, known: number): StoreError {
  return new StoreError(
    'schema_too_new',
    `the PostgreSQL schema is at version ${seen}, newer than this optmark understands (${known}); upgrade optmark on this instance`,
  );
}

/** Brings the current schema to PG_SCHEMA_VERSION; returns the versions applied (none when another instance did it). */
export async function migrate(client: PoolClient, migrations: readonly string[] = PG_MIGRATIONS): Promise<number[]> {
  const known = migrations.length;
  const seen = await appliedVersion(client);
  if (seen > known) throw tooNew(seen, known);
  if (seen === known) return [];
  await client.query('SELECT pg_advisory_lock($1, hashtext(current_schema()))', [LOCK_CLASS]);
  try {
    // Read again under the lock: an instance that waited finds the work done.
    const base = await appliedVersion(client);
    if (base > known) throw tooNew(base, known);
    const applied: number[] = [];
    if (base === 0)
      await client.query('CREATE TABLE IF NOT EXISTS optmark_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (let v = base; v < known; v++) {
      await client.query('BEGIN');
      try {
        await client.query(migrations[v]!);
        await client.query('INSERT INTO optmark_schema (version) VALUES ($1)', [v + 1]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
      applied.push(v + 1);
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1, hashtext(current_schema()))', [LOCK_CLASS]);
  }
}
