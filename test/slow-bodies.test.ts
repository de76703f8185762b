/**
 * Slow bodies (issue #20, point 5): one account's or one address's bodies still arriving hold at most
 * their share of the in-flight budget, and a body slower than the rate floor is answered 408 and its
 * connection closed. The shares are asserted over held-open sockets (no timing); the rate floor with a
 * clock the test moves, and once over HTTP with margins of seconds on both sides.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inflightBytesFor } from '../src/config.js';
import { UPLOAD_RATE_GRACE_MS, type UploadTooSlowError, Uploads } from '../src/http/intake.js';
import { UPFRONT_BODY_BYTES } from '../src/transfer/index.js';
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
    const first = u.arrive(arrival({}));
    u.arrive(arrival({}));
    expect(() => u.arrive(arrival({}))).toThrow(expect.objectContaining({ code: 'overloaded' }));
    // Another account from the same address: within the address's share (20 + 10), then past it.
    u.arrive(arrival({ account: 2 }));
    expect(() => u.arrive(arrival({ account: 3 }))).toThrow(/this address/);
    first.end();
    first.end();
    expect(u.heldByAccount(1)).toBe(10);
    expect(u.heldByAddress('a')).toBe(20);
    u.arrive(arrival({ account: 3 }));
    u.stop();
  });

  it('a body that grows is held to its share as it grows; refused, it keeps what it held, and gives it all back at its end', () => {
    const u = new Uploads({ perAccountBytes: 25, perAddressBytes: 0, minBytesPerSecond: 0 });
    const a = u.arrive(arrival({ bytes: 5 }));
    const b = u.arrive(arrival({ bytes: 5 }));
    a.hold(12);
    expect(u.heldByAccount(1)).toBe(17);
    expect(() => b.hold(14)).toThrow(/growing to 14 would pass its share \(25\)/);
    expect(u.heldByAccount(1)).toBe(17);
    b.hold(13);
    a.hold(3); // holding less than it held changes nothing
    expect(u.heldByAccount(1)).toBe(25);
    a.end();
    b.end();
    expect(u.heldByAccount(1)).toBe(0);
    expect(u.heldByAddress('a')).toBe(0);
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
      // One account's arriving bodies may hold one largest protect (body and answer room), no more.
      env: {
        OPTMARK_POOL_SIZE: '1',
        OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: String(inflightBytesFor(25 * MiB + 64 * 1024, true)),
        OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS: '0',
        OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND: String(MiB),
      },
    });
    a = await server.account();
    b = await server.account();
  });
  afterAll(() => server?.dispose());

  it("an account's uploads hold its share as their bytes arrive: the one that grows past it is 503 mid-body and closed; another account's is served", async () => {
    // Two 25 MiB uploads of account a that sent 24 MiB each hold 2 x 25 MiB of its ~60 MB share.
    const held = [await hold(server.port, a.key, 25 * MiB, 24 * MiB), await hold(server.port, a.key, 25 * MiB, 24 * MiB)];
    await server.readyzUntil('two uploads held', (r) => r.inflight.requests === 2 && r.inflight.bytes >= 50 * MiB);
    // A third is admitted (it holds 2 MiB at first, room that doubles as it fills) and refused when its
    // 8 MiB + 1st byte needs 16 MiB: 50 + 16 would pass the share (it sends no more, so nothing is reset).
    const third = await hold(server.port, a.key, 25 * MiB, 8 * MiB + 1);
    await third.closed;
    expect(third.data()).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(third.data()).toMatch(/\r\nConnection: close\r\n/i);
    expect(third.data()).toContain('"code":"overloaded"');
    expect(third.data()).toMatch(/account's uploads still arriving hold \d+ bytes; this one growing to \d+ would pass its share/);
    const other = await api(server, 'protect', b.key, imageForm(await smallImage('jpeg')));
    expect(other.status).toBe(200);
    for (const h of held) h.socket.destroy();
    await server.settled();
    const again = await api(server, 'protect', a.key, imageForm(await smallImage('jpeg')));
    expect(again.status).toBe(200);
    expect((await server.readyz()).inflight.bytes).toBe(0);
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

describe('13 slow bodies declaring 25 MiB each, no per-client share (behind a proxy, every share off)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await TestServer.start({
      env: {
        OPTMARK_POOL_SIZE: '1',
        OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: '0',
        OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS: '0',
        OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND: '0',
      },
    });
  });
  afterAll(() => server?.dispose());

  it('hold 2 MiB each of the in-flight budget, not the budget: normal protects are served beside them', async () => {
    // Reserved from the declared length, 13 x (25 MiB + its answer's room) was twice the default 384 MiB
    // budget: from the seventh on, they and every other protect were answered 503.
    const attacker = await server.account();
    const { key } = await server.account();
    const slow = [];
    for (let i = 0; i < 13; i++) slow.push(await hold(server.port, attacker.key, 25 * MiB, 1));
    await server.readyzUntil('13 uploads held', (r) => r.inflight.requests === 13);
    const ready = await server.readyz();
    expect(ready.inflight.bytes).toBe(13 * UPFRONT_BODY_BYTES);
    const image = await smallImage('jpeg');
    for (let i = 0; i < 5; i++) {
      const r = await api(server, 'protect', key, imageForm(image));
      expect(r.status).toBe(200);
    }
    // The slow ones are still open, unanswered.
    for (const h of slow) expect(h.data()).toBe('');
    for (const h of slow) h.socket.destroy();
    await server.settled();
    expect((await server.readyz()).inflight.bytes).toBe(0);
  });
});
