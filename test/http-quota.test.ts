// Quotas through the real server: racing clients, refunds of failures, restarts, revocation between
// requests, a busy store, and keys kept out of the log and the database. Stopping the server under load
// (kill -9, SIGTERM) is in test/long/http-quota-stop.test.ts (npm run test:long).
import Database from 'better-sqlite3';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConforms, expectError, remaining } from './helpers/assert.js';
import { GIF, smallImage } from './helpers/images.js';
import { TestServer, api, bodyAfterAnswer, imageForm, multipart, rawRequest, type Answer } from './helpers/server.js';

let server: TestServer;
let image: Buffer;
/** Every key this file issued or sent, to look for in the log and the database at the end. */
const keys: string[] = [];

async function account(options: Parameters<TestServer['account']>[0] = {}): Promise<{ name: string; key: string }> {
  const a = await server.account(options);
  keys.push(a.key);
  return a;
}

/** Seconds from now to the start of the next UTC month: what Retry-After must say on a 429. */
function secondsToNextMonth(): number {
  const now = new Date();
  return Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000);
}

beforeAll(async () => {
  // trace: the most the server can log, and still no key may appear in it.
  server = await TestServer.start({
    env: {
      OPTMARK_POOL_SIZE: '2',
      OPTMARK_QUEUE_LENGTH: '64',
      OPTMARK_LOG_LEVEL: 'trace',
      OPTMARK_SHUTDOWN_TIMEOUT_MS: '3000',
      // The busy-store case waits this long for the write lock, twice: 1 s, not the default 5 s.
      OPTMARK_STORE_TIMEOUT_MS: '1000',
    },
  });
  image = await smallImage('jpeg');
});
afterAll(async () => {
  await server?.dispose();
});

describe('counting', () => {
  it('N clients racing for the last units: exactly the limit succeeds, the rest get 429 with Retry-After', async () => {
    const { name, key } = await account({ protect: 20, verify: 5 });
    for (let i = 0; i < 12; i++) expect((await api(server, 'protect', key, image)).status).toBe(200);
    // Retry-After lies between the seconds left before the requests and after them (no slack that a
    // busy machine could exceed).
    const leftBefore = secondsToNextMonth();
    const answers = await Promise.all(Array.from({ length: 24 }, () => api(server, 'protect', key, image)));
    const leftAfter = secondsToNextMonth();
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect(ok.length).toBe(8);
    expect(refused.length).toBe(16);
    for (const a of refused) {
      expectError(a, 429, 'quota_exceeded');
      expectConforms(a, 'post', '/api/v1/protect');
      const retry = Number(a.headers['retry-after']);
      expect(a.headers['retry-after']).toMatch(/^\d+$/);
      expect(retry).toBeGreaterThanOrEqual(leftAfter);
      expect(retry).toBeLessThanOrEqual(leftBefore + 1);
      expect(remaining(a)).toBe(0);
      expect(a.headers.ratelimit).toBe(`"protect";r=0;t=${retry}`);
      // The message names the UTC instant the counter resets: the first minute of next month.
      const now = new Date();
      const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
      expect((a.json as { error: string }).error).toBe(`The monthly protect limit of 20 is used up; it resets at ${next} 00:00 UTC.`);
    }
    // A success shows the count when it is answered (later racers may have taken units meanwhile).
    for (const a of ok) expect(remaining(a)).toBeLessThanOrEqual(7);
    expect((await server.usage(name)).protect).toMatchObject({ used: 20, limit: 20 });

    // Verify draws on its own counter.
    const verifies = await Promise.all(Array.from({ length: 8 }, () => api(server, 'verify', key, image)));
    expect(verifies.filter((a) => a.status === 200).length).toBe(5);
    expect(verifies.filter((a) => a.status === 429).length).toBe(3);
    expect((await server.usage(name)).verify.used).toBe(5);
  });

  it('failed calls are not counted; a restart keeps the count', async () => {
    const { name, key } = await account({ protect: 3 });
    const failures: Array<[string, Promise<Answer>]> = [
      ['415 GIF', api(server, 'protect', key, imageForm(GIF, 'a.gif', 'image/gif'))],
      ['400 no image part', api(server, 'protect', key, multipart([{ name: 'note', data: 'x' }]))],
      ['422 damaged', api(server, 'protect', key, image.subarray(0, 30))],
      [
        '413 declared too large',
        rawRequest(server.port, {
          path: '/api/v1/protect',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'multipart/form-data; boundary=x' },
          body: Buffer.alloc(10),
          contentLength: 100 * 1024 * 1024,
        }),
      ],
    ];
    for (const [what, p] of failures) expect((await p).status, what).toBeGreaterThanOrEqual(400);
    expect((await server.usage(name)).protect.used).toBe(0);
    for (let i = 0; i < 3; i++) expect((await api(server, 'protect', key, image)).status).toBe(200);
    expect((await api(server, 'protect', key, image)).status).toBe(429);
    expect((await server.usage(name)).protect.used).toBe(3); // the 429 took nothing either
    // At the limit the 429 goes out from the headers, while the body is still on its way (the common case):
    // the body sent after it is read and dropped, with no reset, and the connection serves on.
    const form = imageForm(image);
    const late = await bodyAfterAnswer(server.port, {
      path: '/api/v1/protect',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType },
      body: form.body,
    });
    expectError(late.first, 429, 'quota_exceeded');
    expect(Number(late.first.headers['retry-after'])).toBeGreaterThan(0);
    expect([late.second.status, late.reset]).toEqual([200, false]);

    expect(await server.stop()).toEqual({ code: 0, signal: null });
    await server.restart();
    expectError(await api(server, 'protect', key, image), 429, 'quota_exceeded');
    expect((await server.usage(name)).protect.used).toBe(3);
  });
});

describe('keys', () => {
  it('a key revoked while the server runs is refused on its next request; so is a plan without API access', async () => {
    const { name, key } = await account();
    expect((await api(server, 'verify', key, image)).status).toBe(200);
    const listed = await server.cliOk('key', 'list', name);
    const prefix = key.slice(0, 16);
    expect(listed).toContain(prefix);
    await server.cliOk('key', 'revoke', prefix);
    const refused = await api(server, 'verify', key, image);
    expectError(refused, 401, 'invalid_api_key');
    expect(refused.headers['www-authenticate']).toMatch(/^Bearer /);

    const other = await account();
    expect((await api(server, 'protect', other.key, image)).status).toBe(200);
    await server.cliOk('account', 'set-plan', other.name, 'free');
    expectError(await api(server, 'protect', other.key, image), 403, 'plan_required');
  });

  it('regression: a store busy past its timeout answers 503 overloaded, and the server recovers', async () => {
    const fresh = await account(); // never used: authenticate writes its last-use time
    const used = await account();
    expect((await api(server, 'protect', used.key, image)).status).toBe(200); // last use just written
    const db = new Database(join(server.dataDir, 'optmark.db'));
    db.exec('BEGIN IMMEDIATE'); // hold the write lock past the server's store timeout (1 s here)
    let answers: Answer[];
    try {
      // The first waits in authenticate's last-use write, the second in the quota reservation.
      answers = await Promise.all([api(server, 'protect', fresh.key, image), api(server, 'protect', used.key, image)]);
    } finally {
      db.exec('ROLLBACK');
      db.close();
    }
    for (const a of answers) {
      expectError(a, 503, 'overloaded');
      expect(a.headers['retry-after']).toMatch(/^\d+$/);
      expectConforms(a, 'post', '/api/v1/protect');
    }
    expect(server.running).toBe(true);
    expect((await api(server, 'protect', fresh.key, image)).status).toBe(200);
    expect((await server.usage(used.name)).protect.used).toBe(1);
  });

  it('no key appears in the server log or in plain in the database files', async () => {
    // Keys that fail are not logged either.
    const unknown = `om_live_${'Z'.repeat(43)}`;
    keys.push(unknown);
    expect((await api(server, 'verify', unknown, image)).status).toBe(401);
    expect((await api(server, 'verify', `${unknown}-malformed`, image)).status).toBe(401);
    expect(keys.length).toBeGreaterThan(5);
    await server.stop();
    const files = readdirSync(server.dataDir).filter((f) => f.startsWith('optmark.db'));
    expect(files).toContain('optmark.db');
    const stored = Buffer.concat(files.map((f) => readFileSync(join(server.dataDir, f))));
    expect(server.output).toMatch(/"msg":"request"/); // the log is there, at trace level
    for (const key of keys) {
      expect(server.output.includes(key), 'a key in the log').toBe(false);
      expect(server.output.includes(key.slice(8)), 'a key body in the log').toBe(false);
      expect(stored.includes(Buffer.from(key)), 'a plain key in the database').toBe(false);
    }
  });
});
