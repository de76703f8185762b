// PostgreSQL slow or down (issue #22 item 9): a server whose store is reached through a TCP relay that
// the test controls. When PostgreSQL refuses connections, and when it stops answering altogether (a black
// hole: bytes go in, nothing comes back), API calls are answered 503 with Retry-After and never processed
// for free: once PostgreSQL is back the counter holds exactly the units of the 200s the clients got, none
// held, and the server serves again without a restart.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { optmarkHere } from '../helpers/cli.js';
import { smallImage } from '../helpers/images.js';
import { TestServer, api, waitFor } from '../helpers/server.js';
import { createTestDatabase } from '../helpers/stores.js';

type Mode = 'pass' | 'refuse' | 'blackhole';

/** A TCP relay to PostgreSQL: passes bytes, refuses connections, or swallows everything. */
class Relay {
  mode: Mode = 'pass';
  port = 0;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  constructor(
    readonly host: string,
    readonly upstreamPort: number,
  ) {}

  async listen(): Promise<void> {
    this.#server = createServer((client) => {
      if (this.mode === 'refuse') return client.destroy();
      this.#track(client);
      const up = connect(this.upstreamPort, this.host);
      this.#track(up);
      client.on('data', (d) => this.mode === 'pass' && up.write(d));
      up.on('data', (d) => this.mode === 'pass' && client.write(d));
      const end = () => {
        client.destroy();
        up.destroy();
      };
      client.on('close', end).on('error', end);
      up.on('close', end).on('error', end);
    });
    await new Promise<void>((res) => this.#server!.listen(this.port, '127.0.0.1', () => res()));
    this.port = (this.#server.address() as { port: number }).port;
  }

  #track(s: Socket): void {
    this.#sockets.add(s);
    s.on('close', () => this.#sockets.delete(s));
  }

  /** Switches mode; every open connection is cut (the pool must connect again, into the new mode). */
  set(mode: Mode): void {
    this.mode = mode;
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.set('refuse');
    await new Promise((res) => this.#server?.close(res));
  }
}

let db: { url: string; drop: () => Promise<void> };
let relay: Relay;
let server: TestServer;
let key = '';
const ACCOUNT = 'outage';
/** The store's URL straight to PostgreSQL, and through the relay. */
let direct = '';
let relayed = '';

async function usage(): Promise<{ protect: { used: number }; held: { protect: number } }> {
  const r = await optmarkHere(['usage', ACCOUNT, '--json'], { OPTMARK_DATABASE_URL: direct });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  db = await createTestDatabase();
  const u = new URL(db.url);
  u.searchParams.set('schema', 'outage');
  direct = u.href;
  relay = new Relay(u.hostname, Number(u.port || 5432));
  await relay.listen();
  const via = new URL(direct);
  via.hostname = '127.0.0.1';
  via.port = String(relay.port);
  relayed = via.href;
  const cli = (...args: string[]) => optmarkHere(args, { OPTMARK_DATABASE_URL: direct });
  expect((await cli('account', 'create', ACCOUNT, '--plan', 'pro')).status).toBe(0);
  expect((await cli('account', 'set-limits', ACCOUNT, '--protect', '20')).status).toBe(0);
  key = (await cli('key', 'issue', ACCOUNT)).stdout.trim();
  server = await TestServer.start({ env: { OPTMARK_DATABASE_URL: relayed, OPTMARK_POOL_SIZE: '1', OPTMARK_FINGERPRINT_DETECT: 'off' } });
}, 120_000);

afterAll(async () => {
  await server?.dispose();
  await relay?.close();
  await db?.drop();
});

describe('PostgreSQL away', () => {
  it('refusing connections, then answering nothing: 503 with Retry-After, no unit granted, served again once it is back', async () => {
    const image = await smallImage('jpeg');
    const ok = await api(server, 'protect', key, image);
    expect(ok.status, ok.body.toString().slice(0, 200)).toBe(200);
    expect((await usage()).protect.used).toBe(1);

    for (const mode of ['refuse', 'blackhole'] as const) {
      relay.set(mode);
      for (const endpoint of ['protect', 'verify'] as const) {
        const r = await api(server, endpoint, key, image);
        expect(r.status, `${mode} ${endpoint}: ${r.body.toString().slice(0, 200)}`).toBe(503);
        expect(r.json).toMatchObject({ code: 'overloaded' });
        expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      }
    }

    relay.set('pass');
    // Served again without a restart (the pool connects anew).
    const back = await waitFor(
      'a 200 after PostgreSQL is back',
      async () => {
        const r = await api(server, 'protect', key, image);
        return r.status === 200 ? r : undefined;
      },
      30_000,
    );
    expect(back.headers.ratelimit).toMatch(/;r=18;/);
    // Exactly the two 200s are counted: nothing was granted while the store was away, and nothing is held.
    await waitFor('no unit held', async () => ((await usage()).held.protect === 0 ? true : undefined), 20_000);
    expect((await usage()).protect.used).toBe(2);
  }, 120_000);
});
