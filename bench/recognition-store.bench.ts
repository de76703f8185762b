/**
 * The vault's matching query on both engines: one account's kept PDQ hashes (a text column of 64 hex
 * digits, as the vault's objects table keeps them) searched for those within PDQ_MATCH_DISTANCE of one
 * picture, at 1,000, 10,000 and 100,000 objects (and as many of another account's beside them). Side by
 * side: the rows fetched and compared in JS (src/vault/recognition.ts's nearest), and the distance in SQL
 * (SQLite: a JS function registered on the connection; PostgreSQL: bit_count of the XOR of bit(256)
 * casts). The table here is the bench's own, with the columns the query reads.
 *
 *   npm run build && node dist/bench/recognition-store.bench.js     (BENCH_PG_URL, default the local server)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { distance, PDQ_MATCH_DISTANCE } from '../src/vault/phash.js';
import { type HashedObject, MAX_VAULT_MATCHES, nearest } from '../src/vault/recognition.js';
import { compare, QUICK } from './lib/report.js';
import { prng } from './load/random.js';

const PG_URL = process.env.BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const SIZES = QUICK ? [1000] : [1000, 10_000, 100_000];

const rnd = prng(11);
const hex = (): string => Array.from({ length: 8 }, () => (Math.floor(rnd() * 2 ** 32) >>> 0).toString(16).padStart(8, '0')).join('');

const dir = mkdtempSync(join(tmpdir(), 'optmark-bench-match-'));
const lite = new Database(join(dir, 'bench.db'));
lite.pragma('journal_mode = WAL');
lite.function('pdq_distance', { deterministic: true }, (a: unknown, b: unknown) => distance(String(a), String(b)));
const client = new pg.Client({ connectionString: PG_URL });
await client.connect();
const schema = `bench_match_${process.pid}`;
await client.query(`CREATE SCHEMA ${schema}`);
await client.query(`SET search_path TO ${schema}`);

const DDL = 'CREATE TABLE objects (account_id INTEGER NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, phash TEXT, record TEXT, PRIMARY KEY (account_id, id))';
lite.exec(DDL);
await client.query(DDL);

try {
  let have = 0;
  for (const n of SIZES) {
    // Two accounts of n objects each; a tenth of the objects without a hash (not images, or featureless).
    const rows: Array<[number, string, string, string | null, string | null]> = [];
    for (let i = have; i < n; i++) for (const account of [1, 2]) rows.push([account, `o${i}`, `photo-${i}.jpg`, i % 10 === 9 ? null : hex(), null]);
    have = n;
    const insert = lite.prepare('INSERT INTO objects VALUES (?, ?, ?, ?, ?)');
    lite.transaction(() => {
      for (const r of rows) insert.run(...r);
    })();
    for (let i = 0; i < rows.length; i += 5000) {
      const part = rows.slice(i, i + 5000);
      await client.query(
        `INSERT INTO objects SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[])`,
        [0, 1, 2, 3, 4].map((k) => part.map((r) => r[k])),
      );
    }
    await client.query('ANALYZE objects');
    const probe = (
      lite.prepare('SELECT phash FROM objects WHERE account_id = 1 AND phash IS NOT NULL LIMIT 1 OFFSET ?').get(Math.floor(n / 2)) as { phash: string }
    ).phash;

    const liteRows = lite.prepare('SELECT id, name, phash, record FROM objects WHERE account_id = ? AND phash IS NOT NULL');
    const liteSql = lite.prepare(
      'SELECT id, name, d AS distance, record FROM (SELECT id, name, record, pdq_distance(phash, ?) AS d FROM objects WHERE account_id = ? AND phash IS NOT NULL) WHERE d <= ? ORDER BY d, id LIMIT ?',
    );
    const pgRows = 'SELECT id, name, phash, record FROM objects WHERE account_id = $1 AND phash IS NOT NULL';
    const pgSql = `SELECT id, name, d AS distance, record FROM (SELECT id, name, record, bit_count(('x' || phash)::bit(256) # ('x' || $2)::bit(256))::int AS d FROM objects WHERE account_id = $1 AND phash IS NOT NULL) s WHERE d <= $3 ORDER BY d, id COLLATE "C" LIMIT $4`;

    const a = nearest(liteRows.all(1) as HashedObject[], probe);
    const b = liteSql.all(probe, 1, PDQ_MATCH_DISTANCE, MAX_VAULT_MATCHES);
    const c = (await client.query(pgSql, [1, probe, PDQ_MATCH_DISTANCE, MAX_VAULT_MATCHES])).rows;
    const same = JSON.stringify(a) === JSON.stringify(b) && JSON.stringify(a) === JSON.stringify(c);
    if (!same || a.length === 0) throw new Error(`the four queries disagree: ${JSON.stringify({ a, b, c })}`);

    await compare(
      `matching one picture: SQLite, ${n} objects in the account (${2 * n} in the table)`,
      { name: 'fetch the hashes, nearest() in JS', fn: () => nearest(liteRows.all(1) as HashedObject[], probe) },
      [{ name: 'distance in SQL (registered JS function)', fn: () => liteSql.all(probe, 1, PDQ_MATCH_DISTANCE, MAX_VAULT_MATCHES) }],
      { time: 1500 },
    );
    await compare(
      `matching one picture: PostgreSQL, ${n} objects in the account (${2 * n} in the table)`,
      { name: 'fetch the hashes, nearest() in JS', fn: async () => nearest((await client.query(pgRows, [1])).rows as HashedObject[], probe) },
      [
        {
          name: 'distance in SQL (bit_count of bit(256) XOR)',
          fn: async () => (await client.query(pgSql, [1, probe, PDQ_MATCH_DISTANCE, MAX_VAULT_MATCHES])).rows,
        },
      ],
      { time: 1500 },
    );
  }
} finally {
  await client.query(`DROP SCHEMA ${schema} CASCADE`);
  await client.end();
  lite.close();
  rmSync(dir, { recursive: true, force: true });
}
