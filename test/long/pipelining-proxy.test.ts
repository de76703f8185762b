/**
 * Issue #20, points 4 and 7: what uWebSockets.js 20.30 closes without an answer, and that a proxy in
 * front (HAProxy from Debian, on loopback, as docs/operating.md describes) answers. uWS refuses
 * asynchronous pipelining in its C++ parser (HttpContext.h: a request parsed while the previous answer is
 * pending closes the socket) and every API answer is asynchronous, so five POSTs pipelined on one
 * connection straight to optmark get none; through HAProxy, which reads one request at a time, five 200s
 * in order. The same for a chunk extension and for 10,000 header fields. Direct, nothing is charged.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jpegOfSize } from '../helpers/images.js';
import { TestServer, freePort, imageForm, waitFor } from '../helpers/server.js';

function haproxyBinary(): string {
  for (const p of ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy']) if (existsSync(p)) return p;
  const which = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim();
  if (which) return which;
  throw new Error('HAProxy is not installed (apt-get install -y haproxy; npm run test:long installs it as root)');
}

/** Writes `bytes` on a new connection at once and reads until `answers` status lines came back, the peer closed, or 20 s. */
function exchange(port: number, bytes: Buffer, answers: number): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    let closed = false;
    const done = (): void => {
      clearTimeout(timer);
      s.destroy();
      resolve({ text, closed });
    };
    const timer = setTimeout(done, 20_000);
    s.on('data', (d) => {
      text += d.toString('latin1');
      // Complete once the last answer's body is in (its Content-Length).
      const heads = [...text.matchAll(/HTTP\/1\.1 \d{3}[\s\S]*?\r\n\r\n/g)];
      if (heads.length < answers) return;
      const last = heads[heads.length - 1]!;
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(last[0])?.[1] ?? 0);
      if (text.length >= last.index + last[0].length + length) done();
    });
    s.on('close', () => {
      closed = true;
      done();
    });
    s.on('error', () => undefined);
    s.write(bytes);
  });
}

const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

let server: TestServer;
let haproxy: ChildProcess;
let front = 0;
const dir = mkdtempSync(join(tmpdir(), 'optmark-haproxy-'));

beforeAll(async () => {
  server = await TestServer.start();
  front = await freePort();
  writeFileSync(
    join(dir, 'haproxy.cfg'),
    [
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout client 60s',
      '  timeout server 60s',
      'frontend api',
      `  bind 127.0.0.1:${front}`,
      '  default_backend optmark',
      'backend optmark',
      `  server s1 127.0.0.1:${server.port}`,
      '',
    ].join('\n'),
  );
  haproxy = spawn(haproxyBinary(), ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: 'ignore' });
  await waitFor('HAProxy to answer', async () => {
    if (haproxy.exitCode !== null) throw new Error(`haproxy exited ${haproxy.exitCode}`);
    return (await fetch(`http://127.0.0.1:${front}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined;
  });
});

afterAll(async () => {
  haproxy?.kill('SIGKILL');
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('five verify POSTs of a 1 MB JPEG pipelined on one connection', () => {
  let image: Buffer;
  const pipelined = (key: string): Buffer => {
    const form = imageForm(image);
    return Buffer.concat(
      [1, 2, 3, 4, 5].map((i) =>
        Buffer.concat([
          Buffer.from(
            `POST /api/v1/verify HTTP/1.1\r\nHost: x\r\nX-Request-ID: pipelined-${i}\r\nAuthorization: Bearer ${key}\r\n` +
              `Content-Type: ${form.contentType}\r\nContent-Length: ${form.body.length}\r\n\r\n`,
          ),
          form.body,
        ]),
      ),
    );
  };
  beforeAll(async () => {
    image = await jpegOfSize(1_000_000);
  });

  it('straight to optmark (uWS): the connection is closed without an answer, and nothing is charged or held', async () => {
    const { name, key } = await server.account();
    const r = await exchange(server.port, pipelined(key), 5);
    expect(r.closed).toBe(true);
    expect(statuses(r.text)).toEqual([]);
    const ready = await server.settled();
    expect(ready.inflight.bytes).toBe(0);
    expect((await server.usage(name)).verify.used).toBe(0);
  });

  it('through HAProxy: five 200 answers, in order, and five units charged', async () => {
    const { name, key } = await server.account();
    const r = await exchange(front, pipelined(key), 5);
    expect(statuses(r.text)).toEqual([200, 200, 200, 200, 200]);
    expect([...r.text.matchAll(/\r\nx-request-id: (\S+)\r\n/gi)].map((m) => m[1])).toEqual([1, 2, 3, 4, 5].map((i) => `pipelined-${i}`));
    await server.settled();
    expect((await server.usage(name)).verify.used).toBe(5);
  });
});

describe('framing uWS 20.30 closes on', () => {
  const chunked = async (key: string): Promise<Buffer> => {
    const form = imageForm(await jpegOfSize(20_000));
    const half = form.body.length >> 1;
    const chunk = (b: Buffer): string => `${b.length.toString(16)};ext=1\r\n`;
    return Buffer.concat([
      Buffer.from(
        `POST /api/v1/verify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${form.contentType}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      ),
      Buffer.from(chunk(form.body.subarray(0, half))),
      form.body.subarray(0, half),
      Buffer.from(`\r\n${chunk(form.body.subarray(half))}`),
      form.body.subarray(half),
      Buffer.from('\r\n0\r\n\r\n'),
    ]);
  };
  const manyHeaders = Buffer.from(`GET /healthz HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 10_000 }, (_, i) => `X-H${i}: ${i}\r\n`).join('')}\r\n`);

  it('a chunked body with chunk extensions (;ext=1): closed straight to optmark, 200 through HAProxy', async () => {
    const { key } = await server.account();
    const direct = await exchange(server.port, await chunked(key), 1);
    expect(direct.closed).toBe(true);
    expect(statuses(direct.text).filter((s) => s === 200)).toEqual([]);
    const proxied = await exchange(front, await chunked(key), 1);
    expect(statuses(proxied.text)).toEqual([200]);
  });

  it('10,000 header fields: closed without an answer straight to optmark, a 4xx answer from HAProxy', async () => {
    const direct = await exchange(server.port, manyHeaders, 1);
    expect(direct.closed).toBe(true);
    expect(statuses(direct.text)).toEqual([]);
    const proxied = await exchange(front, manyHeaders, 1);
    expect(statuses(proxied.text)).toHaveLength(1);
    expect(statuses(proxied.text)[0]).toBeGreaterThanOrEqual(400);
    expect(statuses(proxied.text)[0]).toBeLessThan(500);
  });
});
