/**
 * vitest's global setup (both configs): the PostgreSQL server the store tests use. Both engines run the
 * same suites and none is skipped for want of a database, so when the tests cannot log in at
 * OPTMARK_TEST_DATABASE_URL (default the local server on 5432) this starts Debian's postgresql in a
 * private cluster for the run (a temporary folder, a free loopback port, trust authentication), points
 * OPTMARK_TEST_DATABASE_URL at it for the test processes, and stops it at the end. The binaries come from
 * the postgresql package, which test/setup/system.mjs installs (or names) first. About 2 s on a cold start.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** Whether the tests can use the server at `url`: a connection that logs in, not only a port that answers
 * (Debian's own cluster, started when the package is installed, answers on 5432 but asks for a password). */
async function usable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The newest /usr/lib/postgresql/<version>/bin. */
function binaries(): string {
  let versions: string[] = [];
  try {
    versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b));
  } catch {}
  const v = versions.at(-1);
  if (v === undefined)
    throw new Error(
      `no PostgreSQL answers at ${process.env.OPTMARK_TEST_DATABASE_URL ?? DEFAULT_URL} and Debian's postgresql is not installed: apt-get install postgresql`,
    );
  return `/usr/lib/postgresql/${v}/bin`;
}

/** Runs a PostgreSQL program as the postgres user when root (initdb refuses root), else as this user. */
function run(program: string, args: string[]): void {
  const [cmd, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
  const r = spawnSync(cmd as string, argv as string[], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${program} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.error?.message}`);
}

export default async function setup(): Promise<(() => void) | undefined> {
  if (await usable(process.env.OPTMARK_TEST_DATABASE_URL || DEFAULT_URL)) return undefined;
  const bin = binaries();
  const dir = mkdtempSync(join(tmpdir(), 'optmark-test-pg-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const data = join(dir, 'data');
  run(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`;
  run(join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  process.env.OPTMARK_TEST_DATABASE_URL = `postgres://postgres@127.0.0.1:${port}/postgres`;
  process.stderr.write(`test setup: a private PostgreSQL cluster on 127.0.0.1:${port} for this run (${dir})\n`);
  return () => {
    try {
      run(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}
