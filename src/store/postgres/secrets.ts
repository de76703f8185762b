/**
 * What every PostgreSQL instance shares besides quotas: the provenance public keys (announced to the
 * other instances by NOTIFY, heard by LISTEN on a connection of its own) and the named secrets, created
 * by the first instance that asks. Their writes are durable whatever the session's synchronous_commit.
 */
import pg from 'pg';
import type { StoredPublicKey } from '../types.js';
import type { PgConnection } from './connection.js';

export const KEYS_CHANNEL = 'optmark_signing_keys';

export class PgSecrets {
  readonly #conn: PgConnection;
  #listeners: pg.Client[] = [];
  #closed = false;

  constructor(conn: PgConnection) {
    this.#conn = conn;
  }

  async recordPublicKey(keyId: string, pem: string, now: Date): Promise<boolean> {
    return this.#conn.tx(async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      const r = await c.query('INSERT INTO signing_keys (key_id, public_pem, recorded_at) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING', [
        keyId,
        pem,
        now,
      ]);
      if (r.rowCount === 1) await c.query('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, keyId]);
      return r.rowCount === 1;
    });
  }

  async listPublicKeys(): Promise<StoredPublicKey[]> {
    const r = await this.#conn.q<{ key_id: string; public_pem: string; recorded_at: Date }>(
      'SELECT key_id, public_pem, recorded_at FROM signing_keys ORDER BY recorded_at, key_id LIMIT 10000',
    );
    return r.rows.map((k) => ({ keyId: k.key_id, pem: k.public_pem, recordedAt: k.recorded_at.toISOString() }));
  }

  async sharedSecret(name: string, create: () => Buffer): Promise<Buffer> {
    await this.#conn.tx(async (c) => {
      await c.query('SET LOCAL synchronous_commit = on');
      await c.query('INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO NOTHING', [name, create()]);
    });
    const r = await this.#conn.q<{ value: Buffer }>('SELECT value FROM secrets WHERE name = $1', [name]);
    return r.rows[0]!.value;
  }

  /** LISTENs on its own connection (reconnecting after a failure); `listener` also runs after each reconnect. */
  async onPublicKeysChanged(listener: () => void): Promise<() => Promise<void>> {
    let stopped = false;
    let client: pg.Client | undefined;
    const connect = async (): Promise<void> => {
      if (stopped || this.#closed) return;
      const c = new pg.Client({ ...this.#conn.config, query_timeout: undefined });
      client = c;
      this.#listeners.push(c);
      c.on('notification', () => listener());
      c.on('error', () => undefined);
      c.on('end', () => {
        this.#listeners = this.#listeners.filter((x) => x !== c);
        if (!stopped && !this.#closed) setTimeout(() => void connect(), 1000).unref();
      });
      try {
        await c.connect();
        await c.query(`LISTEN ${KEYS_CHANNEL}`);
        listener(); // anything recorded while not listening
      } catch {
        await c.end().catch(() => undefined);
      }
    };
    await connect();
    return async () => {
      stopped = true;
      await client?.end().catch(() => undefined);
    };
  }

  /** Ends every LISTEN connection, for good. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#listeners.map((c) => c.end().catch(() => undefined)));
  }
}
