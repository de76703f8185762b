/**
 * An early refusal does not become a reset (issue #37, point 8): a body refused 503 in the middle, with
 * at most DRAIN_BYTES of it still to come, is read to its end and dropped instead of closed. Closed with
 * those bytes unread, the kernel answers them with a reset that can reach the client before the 503.
 * The refusal is made deterministic by the per-account share of arriving room: three held uploads of one
 * account leave 128 KiB less than the 2 MiB a fourth is admitted with plus its growth.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inflightBytesFor, PAGE_BYTES } from '../src/config.js';
import { DRAIN_BYTES } from '../src/http/intake.js';
import { UPFRONT_BODY_BYTES } from '../src/transfer/index.js';
import { TestServer, waitFor } from './helpers/server.js';

const MiB = 1024 * 1024;
const SHARE = inflightBytesFor(25 * MiB + 64 * 1024, true);

/** Opens a connection, sends the headers of a protect declaring `declared` bytes and `first` bytes of it; keeps it open. */
async function upload(port: number, key: string, declared: number, first: number): Promise<{ socket: Socket; data: () => string }> {
  const socket = connect(port, '127.0.0.1');
  let got = '';
  socket.on('data', (d) => (got += d.toString('latin1')));
  socket.on('error', (e) => (got += ` [${(e as NodeJS.ErrnoException).code}]`));
  await new Promise<void>((r) => socket.once('connect', () => r()));
  socket.write(
    `POST /api/v1/protect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write(Buffer.alloc(first, 0x41));
  return { socket, data: () => got };
}

describe('a refusal mid-body with a small remainder', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await TestServer.start({
      env: {
        OPTMARK_POOL_SIZE: '1',
        OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT: String(SHARE),
        OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS: '0',
        OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND: '0',
      },
    });
  });
  afterAll(() => server?.dispose());

  it('answers 503 on a connection it keeps: the rest is read and dropped, and the next request is served', async () => {
    const { key } = await server.account();
    // Held: 25 + 25 MiB, and a third whose room leaves 2 MiB + 128 KiB of the share.
    const third = Math.floor((SHARE - 50 * MiB - UPFRONT_BODY_BYTES - 128 * 1024) / PAGE_BYTES) * PAGE_BYTES;
    const held = [await upload(server.port, key, 25 * MiB, 24 * MiB), await upload(server.port, key, 25 * MiB, 24 * MiB)];
    held.push(await upload(server.port, key, third, third - 1024));
    await server.readyzUntil('three uploads held', (r) => r.inflight.requests === 3 && r.inflight.bytes >= 50 * MiB + third);
    // The fourth is admitted with 2 MiB and refused when its room grows to 2 MiB + 200 KiB: 72 KiB past the
    // share, with under 200 KiB of it still to come (it sends them all at once, as a client does).
    const declared = UPFRONT_BODY_BYTES + 200 * 1024;
    expect(declared - UPFRONT_BODY_BYTES).toBeLessThan(DRAIN_BYTES);
    const fourth = await upload(server.port, key, declared, declared);
    await waitFor('the 503', () => (fourth.data().includes('"code":"overloaded"') ? true : undefined));
    expect(fourth.data()).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(fourth.data()).toContain('this one growing to');
    expect(fourth.data()).not.toMatch(/\r\nConnection: close\r\n/i);
    // The same connection serves the next request: the body's rest was read, not left to a reset.
    fourth.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitFor('the next answer', () => (fourth.data().includes('{"status":"ok"}') ? true : undefined));
    expect(fourth.data()).not.toContain('[ECONNRESET]');
    for (const h of [...held, fourth]) h.socket.destroy();
    await server.settled();
    expect((await server.readyz()).inflight.bytes).toBe(0);
  });
});
