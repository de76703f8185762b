// Quotas when the server is stopped under load (kill -9, SIGTERM), through the real server and a restart:
// the count on disk is what the clients saw. Load runs, so they run with `npm run test:long`; the rest of
// the quota tests are in test/http-quota.test.ts.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jpegOfSize, smallImage } from '../helpers/images.js';
import { TestServer, api, imageForm, waitFor } from '../helpers/server.js';

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

  it('kill -9 while a 200 is still being written: the unit goes back (its client never had the whole answer)', async () => {
    const { name, key } = await account();
    // A 12 MB upload answers about 16 MB of JSON: more than loopback's socket buffers hold, so a client
    // that reads only the first bytes keeps the server writing.
    const form = imageForm(await jpegOfSize(12 << 20));
    const socket = connect(server.port, '127.0.0.1');
    const head = `POST /api/v1/protect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${form.contentType}\r\nContent-Length: ${form.body.length}\r\n\r\n`;
    socket.write(Buffer.concat([Buffer.from(head), form.body]));
    const first = await new Promise<string>((resolve, reject) => {
      socket.once('data', (chunk: Buffer) => resolve(chunk.subarray(0, 12).toString('latin1')));
      socket.once('error', reject);
    });
    socket.pause();
    expect(first).toBe('HTTP/1.1 200');
    await new Promise((r) => setTimeout(r, 500));
    server.proc!.kill('SIGKILL');
    expect((await server.exited).signal).toBe('SIGKILL');
    socket.destroy();
    await server.restart();
    expect((await server.usage(name)).protect.used).toBe(0);
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
