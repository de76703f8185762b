/**
 * The transport baseline of the tail-latency target: optmark's own transport with the least per-request
 * work a protect has, so that its p99/p50 at a given share of its capacity is what this machine, the
 * transport and the co-located load generator alone cost in tail latency.
 *
 * The same uWebSockets.js server and answer writer as optmark (src/http/uws.ts, src/http/respond.ts),
 * the same bytes in (the whole upload) and out (an answer of a protect's length, 4/3 of the upload),
 * and one pass of per-byte work in worker threads, one per pool slot: SHA-256 of the body, which is
 * transferred to the worker and back, not copied. No multipart parsing, marking, base64, JSON or quota,
 * and no buffer allocated per request: bodies land in reused buffers and every answer is written from
 * one buffer.
 *
 *   node dist/bench/load/transport.js <port> <workers>
 */
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Exchange } from '../../src/http/respond.js';
import { loadUws } from '../../src/http/uws.js';

const WORKER = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
parentPort.on('message', ({ id, body, length }) => {
  createHash('sha256').update(new Uint8Array(body, 0, length)).digest();
  parentPort.postMessage({ id, body, length }, [body]);
});`;

/** Largest body it takes (optmark's upload limit plus room for the multipart framing); beyond it, 413. */
const MAX_BODY = 26 * 1024 * 1024;

/** The length of a protect answer for an upload of `bodyBytes`: its base64 (the image) plus the JSON around it. */
export function answerBytes(bodyBytes: number): number {
  return 4 * Math.ceil(bodyBytes / 3) + 200;
}

interface Task {
  id: number;
  body: ArrayBuffer;
  length: number;
}

export function transportServer(workers: number): { listen(port: number, host: string): Promise<number>; close(): Promise<void> } {
  const { uws } = loadUws(false);
  const pool = Array.from({ length: workers }, () => new Worker(WORKER, { eval: true }));
  const idle = [...pool];
  const queue: Task[] = [];
  const waiting = new Map<number, Exchange>();
  const buffers: ArrayBuffer[] = [];
  let answer = Buffer.alloc(0);
  let nextId = 0;

  const dispatch = (t: Task): void => {
    const w = idle.pop();
    if (w) w.postMessage(t, [t.body]);
    else queue.push(t);
  };
  for (const w of pool) {
    w.on('message', ({ id, body, length }: Task) => {
      const ex = waiting.get(id)!;
      waiting.delete(id);
      idle.push(w);
      const next = queue.shift();
      if (next) dispatch(next);
      buffers.push(body);
      const n = answerBytes(length);
      if (answer.length < n) answer = Buffer.alloc(n, 0x41);
      void ex.json(200, answer.subarray(0, n));
    });
  }

  const app = uws.App();
  app.any('/*', (res, req) => {
    const ex = new Exchange(res, String(nextId), 'transport', 0n);
    const declared = Number(req.getHeader('content-length')) || 0;
    if (declared > MAX_BODY) {
      void ex.send(413, { Connection: 'close' }, '');
      return;
    }
    let buf = buffers.pop();
    if (!buf || buf.byteLength < declared) buf = new ArrayBuffer(Math.max(declared, 1));
    let body = new Uint8Array(buf);
    let got = 0;
    res.onData((chunk, isLast) => {
      if (ex.answered || ex.aborted) return;
      if (got + chunk.byteLength > MAX_BODY) {
        void ex.send(413, { Connection: 'close' }, '');
        return;
      }
      if (got + chunk.byteLength > body.length) {
        const bigger = new Uint8Array(Math.max(2 * body.length, got + chunk.byteLength));
        bigger.set(body.subarray(0, got));
        body = bigger;
      }
      body.set(new Uint8Array(chunk), got);
      got += chunk.byteLength;
      if (!isLast) return;
      const id = nextId++;
      waiting.set(id, ex);
      dispatch({ id, body: body.buffer as ArrayBuffer, length: got });
    });
  });

  let socket: unknown;
  return {
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        app.listen(host, port, (s) => {
          if (!s) return reject(new Error(`transport baseline: cannot listen on ${host}:${port}`));
          socket = s;
          resolve(uws.us_socket_local_port(s));
        });
      }),
    close: async () => {
      if (socket) uws.us_listen_socket_close(socket as never);
      await Promise.all(pool.map((w) => w.terminate()));
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.argv[2]);
  const workers = Number(process.argv[3] ?? 2);
  if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(workers) || workers < 1) {
    process.stderr.write('usage: node dist/bench/load/transport.js <port> <workers>\n');
    process.exit(2);
  }
  const server = transportServer(workers);
  const bound = await server.listen(port, '127.0.0.1');
  process.stdout.write(`listening ${bound}\n`);
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
}
