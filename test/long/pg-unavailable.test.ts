// PostgreSQL slow or down (issue #22 item 9): a server whose store is reached through a TCP relay that
// the test controls. When PostgreSQL refuses connections, and when it stops answering altogether (a black
// hole: bytes go in, nothing comes back), API calls are answered 503 with Retry-After and never processed
// for free: once PostgreSQL is back the counter holds exactly the units of the 200s the clients got, none
// held, and the server serves again without a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { optmarkHere } from '../helpers/cli.js';
import { smallImage } from '../helpers/images.js';
import { Relay } from '../helpers/relay.js';
import { TestServer, api, bodyAfterAnswer, imageForm, waitFor } from '../helpers/server.js';
import { createTestDatabase } from '../helpers/stores.js';

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
  relay = await Relay.to(direct);
  relayed = relay.via(direct);
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
      if (mode === 'refuse') {
        // The 503 goes out from the headers (the reservation fails at once); the body sent after it is read
        // and dropped, with no reset, and the connection serves on.
        const form = imageForm(image);
        const late = await bodyAfterAnswer(server.port, {
          path: '/api/v1/protect',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType },
          body: form.body,
        });
        expect(late.first.status, late.first.body.toString().slice(0, 200)).toBe(503);
        expect(late.first.json).toEqual({ error: expect.any(String), code: 'overloaded' });
        expect(Number(late.first.headers['retry-after'])).toBeGreaterThan(0);
        expect([late.second.status, late.reset]).toEqual([200, false]);
      }
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
