/**
 * The dashboard's JSON routes keep the API's edge rules (issue #37, point 8): a declared Content-Length
 * over the limit is 413 before a byte of body is read, and a stalled body is 408 `upload_too_slow` with
 * its connection closed (uWS's own idle timer would close it later, with no answer at all). Raw sockets,
 * so that the body can be declared and not sent.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UPLOAD_RATE_GRACE_MS } from '../src/http/intake.js';
import { TestServer } from './helpers/server.js';

/**
 * Sends the headers of a batch request declaring `declared` bytes, then `sent`; collects what comes back
 * until the server closes, a whole JSON answer came (the connection may stay open), or `waitMs` pass.
 */
function batchRequest(port: number, key: string, declared: number, sent: string, waitMs: number): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed });
    };
    const timer = setTimeout(() => done(false), waitMs);
    socket.on('data', (d) => {
      text += d.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /\r\nContent-Length: (\d+)\r\n/i.exec(text);
      if (head > 0 && length && text.length >= head + 4 + Number(length[1])) setTimeout(() => done(socket.destroyed), 100);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => done(true));
    socket.on('connect', () =>
      socket.write(
        `POST /api/v1/dashboard/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${sent}`,
      ),
    );
  });
}

describe('dashboard JSON routes at the edge', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start();
    key = (await server.account()).key;
  });
  afterAll(() => server?.dispose());

  it('a declared 50 MB body is answered 413 at once, before a byte is sent', async () => {
    const { text } = await batchRequest(server.port, key, 50_000_000, '', 20_000);
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).toContain('"code":"payload_too_large"');
  });

  it('a stalled body is answered 408 upload_too_slow and its connection closed', async () => {
    const c = await batchRequest(server.port, key, 100, '{"size":', UPLOAD_RATE_GRACE_MS + 8000);
    expect(c.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(c.text).toMatch(/\r\nConnection: close\r\n/i);
    expect(c.text).toContain('"code":"upload_too_slow"');
    expect(c.closed).toBe(true);
  });

  it('a small body is read as before: a batch is opened', async () => {
    const body = '{"size":2}';
    const c = await batchRequest(server.port, key, body.length, body, 3000);
    expect(c.text).toMatch(/^HTTP\/1\.1 201 /);
    expect(c.text).toContain('"size":2');
  });
});
