// The PostgreSQL client is loaded only when OPTMARK_DATABASE_URL selects PostgreSQL: a SQLite server and
// the CLI run with a module hook that makes `pg` impossible to load, and still start, mark and count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallImage } from './helpers/images.js';
import { TestServer, api } from './helpers/server.js';

// Registered before the program's own modules: resolving `pg` (or any file inside it) throws.
const HOOK = `data:text/javascript,${encodeURIComponent(
  `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent('export async function resolve(s, c, next) { if (s === "pg" || s.startsWith("pg/")) throw new Error("the pg module was loaded"); return next(s, c); }'));`,
)}`;

let server: TestServer;

beforeAll(async () => {
  server = await TestServer.start({ env: { NODE_OPTIONS: `--import=${HOOK}`, OPTMARK_POOL_SIZE: '1' } });
});
afterAll(async () => {
  await server?.dispose();
});

describe('the PostgreSQL client on a SQLite store', () => {
  it('the hook does refuse pg (the test can fail)', async () => {
    const r = await server.cli('store', 'migrate', '--to', 'postgres://nobody@127.0.0.1:1/none');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('the pg module was loaded');
  });

  it('is never loaded by serve, account, key and usage', async () => {
    const { name, key } = await server.account();
    const image = await smallImage('jpeg');
    expect((await api(server, 'protect', key, image)).status).toBe(200);
    expect((await server.usage(name)).protect.used).toBe(1);
    expect(server.output).not.toContain('the pg module was loaded');
  });
});
