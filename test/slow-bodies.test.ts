/**
 * Slow bodies (issue #20, point 5): one account's or one address's bodies still arriving hold at most
 * their share of the in-flight budget, and a body slower than the rate floor is answered 408 and its
 * connection closed. The shares are asserted over held-open sockets (no timing); the rate floor with a
 * clock the test moves, and once over HTTP with margins of seconds on both sides.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inflightBytesFor } from '../src/config.js';
import { UPLOAD_RATE_GRACE_MS, type UploadTooSlowError, Uploads } from '../src/http/uploads.js';
import { smallImage } from './helpers/images.js';
import { TestServer, api, imageForm, waitFor } from './helpers/server.js';

const MiB = 1024 * 1024;

describe('Uploads (shares and the rate floor, on a clock the test moves)', () => {
  const arrival = (over: Partial<Parameters<Uploads['arrive']>[0]> & { got?: { n: number }; slow?: UploadTooSlowError[] }) => ({
    account: 1,
    address: 'a',
    bytes: 10,
    startedMs: 0,
    received: () => over.got?.n ?? 0,
    tooSlow: (e: UploadTooSlowError) => over.slow?.push(e),
    ...over,
  });

  it('an account and an address hold at most their share; ending a watch gives it back, once', () => {
    const u = new Uploads({ perAccountBytes: 25, perAddressBytes: 35, minBytesPerSecond: 0 });
    const end1 = u.arrive(arrival({}));
    u.arrive(arrival({}));
    expect(() => u.arrive(arrival({}))).toThrow(expect.objectContaining({ code: 'overloaded' }));
    // Another account from the same address: within the address's share (20 + 10), then past it.
    u.arrive(arrival({ account: 2 }));
    expect(() => u.arrive(arrival({ account: 3 }))).toThrow(/this address/);
    end1();
    end1();
    expect(u.heldByAccount(1)).toBe(10);
    expect(u.heldByAddress('a')).toBe(20);
    u.arrive(arrival({ account: 3 }));
    u.stop();
  });

  it('a body behind the floor after the grace period is told once; one that keeps up is not', () => {
    let now = 0;
    const u = new Uploads({ perAccountBytes: 0, perAddressBytes: 0, minBytesPerSecond: 1000 }, () => now);
    const slowGot = { n: 0 };
    const fastGot = { n: 0 };
    const slow: UploadTooSlowError[] = [];
    const fast: UploadTooSlowError[] = [];
    u.arrive(arrival({ got: slowGot, slow }));
    u.arrive(arrival({ account: 2, got: fastGot, slow: fast }));
    now = UPLOAD_RATE_GRACE_MS;
    u.sweep();
    expect(slow).toHaveLength(0);
    now = UPLOAD_RATE_GRACE_MS + 2000;
    slowGot.n = 1999;
    fastGot.n = 2000;
    u.sweep();
    u.sweep();
    expect(slow).toHaveLength(1);
    expect(slow[0]!.code).toBe('upload_too_slow');
    expect(fast).toHaveLength(0);
    u.stop();
  });
});

/** Opens a connection, sends the headers of an upload declaring `declared` bytes and `first` bytes of it; keeps it open. */
async function hold(port: number, key: string, declared: number, first = 1024): Promise<{ socket: Socket; data: () => string; closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  let got = '';
  socket.on('data', (d) => (got += d.toString('latin1')));
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.on('error', () => undefined);
  await new Promise<void>((r) => socket.once('connect', () => r()));
  socket.write(
    `POST /api/v1/protect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write(Buffer.alloc(first, 0x41));
  return { socket, data: () => got, closed };
}

describe('slow bodies over HTTP', () => {
  let server: TestServer;
  let a: { name: string; key: string };
  let b: { name: string; key: string };
  beforeAll(async () => {
    server = await TestServer.start({
      // Room for two held 20 MiB protects (body and answer) and not one more small one.
      env: {
        OPTMARK_POOL_SIZE: '1',
        OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: String(2 * inflightBytesFor(20 * MiB, true) + 4096),
        OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND: String(MiB),
      },
    });
    a = await server.account();
    b = await server.account();
  });
  afterAll(() => server?.dispose());

  it("an account's slow uploads hold its share, not the server: its next one is 503, another account's is served", async () => {
    const held = [await hold(server.port, a.key, 20 * MiB), await hold(server.port, a.key, 20 * MiB)];
    await server.readyzUntil('two uploads held', (r) => r.inflight.requests === 2);
    const third = await api(server, 'protect', a.key, imageForm(await smallImage('jpeg')));
    expect(third.status).toBe(503);
    expect(third.json).toMatchObject({ code: 'overloaded' });
    expect(String((third.json as { error: string }).error)).toMatch(/account's uploads still arriving/);
    const other = await api(server, 'protect', b.key, imageForm(await smallImage('jpeg')));
    expect(other.status).toBe(200);
    for (const h of held) h.socket.destroy();
    await server.settled();
    const again = await api(server, 'protect', a.key, imageForm(await smallImage('jpeg')));
    expect(again.status).toBe(200);
  });

  it('a body slower than the floor is answered 408 upload_too_slow and its connection closed; no unit is charged', async () => {
    const used = async (): Promise<number> => Number(/protect\D+(\d+)/.exec(await server.cliOk('usage', b.name))![1]);
    const unitsBefore = await used();
    const h = await hold(server.port, b.key, 20 * MiB, 64 * 1024);
    // 32 KiB a second keeps uWS's own idle timer (16 KiB/s over 10 s) from closing first.
    const trickle = setInterval(() => h.socket.writable && h.socket.write(Buffer.alloc(32 * 1024, 0x41)), 1000);
    try {
      await waitFor('the 408', () => (h.data().includes('\r\n\r\n') ? true : undefined), UPLOAD_RATE_GRACE_MS + 4000);
      await h.closed;
    } finally {
      clearInterval(trickle);
    }
    expect(h.data()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(h.data()).toMatch(/\r\nConnection: close\r\n/i);
    expect(h.data()).toContain('"code":"upload_too_slow"');
    await server.settled();
    expect(await used()).toBe(unitsBefore);
  });
});
