/**
 * Request framing (issue #37, point 3; RFC 9112 6.1 and 6.3): two different Content-Length headers, or a
 * Transfer-Encoding other than one plain `chunked`, are answered 400 and the connection closed, and the
 * request smuggled behind them is never answered. Over raw sockets, with uWS's own parser in the server.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer } from './helpers/server.js';

const SMUGGLED = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';

interface Conversation {
  /** Everything the server wrote. */
  text: string;
  /** The server closed the connection (within the wait). */
  closed: boolean;
}

/**
 * Writes `first` on a new connection; once an answer's head came back (or at once, with `then` undefined)
 * writes `then`; returns what came back once the server closed the connection, `answers` answers came back
 * (and 200 ms more passed), or 3 s passed.
 */
function converse(port: number, first: string, then?: string, answers = Number.POSITIVE_INFINITY): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let sentThen = then === undefined;
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed });
    };
    const timer = setTimeout(() => done(false), 3000);
    socket.on('data', (d) => {
      text += d.toString('latin1');
      if (statuses(text).length >= answers) setTimeout(() => done(false), 200);
      if (!sentThen && text.includes('\r\n\r\n')) {
        sentThen = true;
        // The smuggled bytes arrive after the answer to the first request, in a read of their own.
        setTimeout(() => socket.writable && socket.write(then!), 50);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => done(true));
    socket.on('connect', () => socket.write(first));
  });
}

/** The status lines in what the server wrote. */
function statuses(text: string): string[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]!);
}

describe('request framing', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start();
    key = (await server.account()).key;
  });
  afterAll(() => server?.dispose());

  it('Content-Length 0 then 37, the smuggled request in the same read: it is never dispatched (the connection closes)', async () => {
    // POST /healthz is answered at once (405): before, the 37 bytes after it were a second request, answered 200.
    const c = await converse(server.port, `POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`);
    expect(c.closed).toBe(true);
    expect(statuses(c.text)).not.toContain('200');
    expect(statuses(c.text).every((s) => s === '400')).toBe(true);
  });

  it('Content-Length 0 then 37 on the API, the smuggled bytes in a later read: 400 invalid_request, the connection closed, the second request never answered', async () => {
    const head = `POST /api/v1/verify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 0\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n`;
    const c = await converse(server.port, head, SMUGGLED);
    expect(statuses(c.text)).toEqual(['400']);
    expect(c.text).toMatch(/\r\nConnection: close\r\n/i);
    expect(c.text).toContain('"code":"invalid_request"');
    expect(c.text).toContain('different Content-Length headers');
    expect(c.closed).toBe(true);
  });

  it('Transfer-Encoding "chunked, identity": 400, the connection closed, what follows the chunked body never answered', async () => {
    const head = `POST /api/v1/verify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`;
    const c = await converse(server.port, head, SMUGGLED);
    expect(statuses(c.text)).toEqual(['400']);
    expect(c.text).toMatch(/\r\nConnection: close\r\n/i);
    expect(c.text).toContain('Transfer-Encoding');
    expect(c.closed).toBe(true);
    const twice = await converse(
      server.port,
      'POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      SMUGGLED,
    );
    expect(statuses(twice.text)).toEqual(['400']);
    expect(twice.closed).toBe(true);
  });

  it('one Content-Length, the same Content-Length twice, or one plain chunked: framed as before, the connection kept', async () => {
    for (const framing of ['Content-Length: 0\r\n', 'Content-Length: 0\r\nContent-Length: 0\r\n', 'Transfer-Encoding: chunked\r\n']) {
      const body = framing.startsWith('Transfer') ? '0\r\n\r\n' : '';
      const c = await converse(server.port, `POST /healthz HTTP/1.1\r\nHost: x\r\n${framing}\r\n${body}`, SMUGGLED, 2);
      expect(statuses(c.text), framing).toEqual(['405', '200']);
      expect(c.closed, framing).toBe(false);
    }
  });
});
