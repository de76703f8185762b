// Quotas when the server is stopped under load (kill -9, SIGTERM), through the real server and a restart:
// the count on disk is what the clients saw. Load runs, so they run with `npm run test:long`; the rest of
// the quota tests are in test/http-quota.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallImage } from '../helpers/images.js';
import { TestServer, api, waitFor } from '../helpers/server.js';

let server: TestServer;
let image: Buffer;

async function account(options: Parameters<TestServer['account']>[0] = {}): Promise<{ name: string; key: string }> {
  return server.account(options);
}

beforeAll(async () => {
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2', OPTMARK_QUEUE_LENGTH: '64', OPTMARK_SHUTDOWN_TIMEOUT_MS: '3000' } });
  image = await smallImage('jpeg');
});
afterAll(async () => {
  await server?.dispose();
});

/** `loops` clients calling protect back to back until stop() is called; counts the 200s they saw. */
function hammer(key: string, loops: number): { successes: () => number; stop: () => Promise<void> } {
  let successes = 0;
  let stopped = false;
  const runs = Array.from({ length: loops }, async () => {
    while (!stopped) {
      try {
        if ((await api(server, 'protect', key, image)).status === 200) successes++;
      } catch {
        return; // the server went away
      }
    }
  });
  return {
    successes: () => successes,
    stop: async () => {
      stopped = true;
      await Promise.all(runs);
    },
  };
}

describe('stopping under load', () => {
  it('kill -9: the count after restart is the successes clients saw, plus at most one per client in flight', async () => {
    const loops = 8;
    const { name, key } = await account();
    const load = hammer(key, loops);
    await waitFor('some successes under load', () => (load.successes() >= 40 ? true : undefined));
    server.proc!.kill('SIGKILL');
    expect((await server.exited).signal).toBe('SIGKILL');
    await load.stop();
    const seen = load.successes();
    await server.restart();
    const used = (await server.usage(name)).protect.used;
    expect(used).toBeGreaterThanOrEqual(seen);
    expect(used).toBeLessThanOrEqual(seen + loops);
    // The restarted server goes on counting from there.
    const next = await api(server, 'protect', key, image);
    expect(next.status).toBe(200);
    expect((await server.usage(name)).protect.used).toBe(used + 1);
  });

  it('SIGTERM under load: the count is exactly the successes clients saw', async () => {
    const { name, key } = await account();
    const load = hammer(key, 8);
    await waitFor('some successes under load', () => (load.successes() >= 40 ? true : undefined));
    server.proc!.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    await load.stop();
    const seen = load.successes();
    await server.restart();
    expect((await server.usage(name)).protect.used).toBe(seen);
  });
});
