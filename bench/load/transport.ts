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
 *   node dist/bench/load/transport.js <port> <workers> [sha256|protect]
 */
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { MULTIPART_SLACK_BYTES, answerBytesFor, loadConfig } from '../../src/config.js';
import { Exchange } from '../../src/http/respond.js';
import { loadUws } from '../../src/http/uws.js';

/**
 * The workers' per-request work: `sha256` (the baseline: one hash of the body, an answer of a protect's
 * length from one static buffer) or `protect` (optmark's own multipart parse and protect, answers byte
 * for byte optmark's, written into pooled buffers): the step between the two and optmark itself splits
 * a protect's cost into the transport, the worker's work and the event loop's extras.
 */
export type TransportWork = 'sha256' | 'protect';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const pipeline = workerData.work === 'protect'
  ? Promise.all([import(workerData.upload), import(workerData.protect)])
  : undefined;
parentPort.on('message', async ({ id, body, length, contentType, out }) => {
  const src = new Uint8Array(body, 0, length);
  if (!pipeline) {
    createHash('sha256').update(src).digest();
    parentPort.postMessage({ id, body, length }, [body]);
    return;
  }
  const [{ parseUpload }, { runProtect }] = await pipeline;
  try {
    const upload = await parseUpload(src, contentType, workerData.maxUploadBytes);
    // Files without Content Credentials (the capacity corpus): the policy is never asked for a signer.
    const policy = { mode: 'invalidate', identity: () => Promise.reject(new Error('no C2PA signer here')) };
    const answer = (await runProtect(upload.bytes, 'image', policy, new Uint8Array(out))).body;
    parentPort.postMessage({ id, body, length, out, written: answer.buffer === out ? answer.length : -1 }, [body, out]);
  } catch {
    parentPort.postMessage({ id, body, length, out, written: -1 }, [body, out]);
  }
});`;

/** The length of a protect answer for an upload of `bodyBytes`: its base64 (the image) plus the JSON around it. */
export function answerBytes(bodyBytes: number): number {
  return 4 * Math.ceil(bodyBytes / 3) + 200;
}

interface Task {
  id: number;
  body: ArrayBuffer;
  length: number;
  contentType: string;
  /** `protect` work: the pooled buffer the answer is written into, and its length once written (-1: refused). */
  out?: ArrayBuffer;
  written?: number;
}

const PIPELINE = (m: string): string => new URL(`../../src/pipeline/${m}.js`, import.meta.url).href;

export function transportServer(
  workers: number,
  work: TransportWork = 'sha256',
): { listen(port: number, host: string): Promise<number>; close(): Promise<void> } {
  const { uws } = loadUws(false);
  // optmark's own limits, from the same OPTMARK_* environment: the largest image, and the largest body
  // (that plus the multipart framing), beyond which the answer is 413.
  const { maxUploadBytes } = loadConfig();
  const maxBody = maxUploadBytes + MULTIPART_SLACK_BYTES;
  const workerData = { work, maxUploadBytes, upload: PIPELINE('upload'), protect: PIPELINE('protect') };
  const pool = Array.from({ length: workers }, () => new Worker(WORKER, { eval: true, workerData }));
  const outs: ArrayBuffer[] = [];
  const idle = [...pool];
  const queue: Task[] = [];
  const waiting = new Map<number, Exchange>();
  const buffers: ArrayBuffer[] = [];
  let answer = Buffer.alloc(0);
  let nextId = 0;

  const dispatch = (t: Task): void => {
    const w = idle.pop();
    if (!w) return void queue.push(t);
    if (work === 'protect' && !t.out) {
      // Sized as optmark sizes a protect's answer room.
      const need = answerBytesFor(t.length);
      let out = outs.pop();
      if (!out || out.byteLength < need) out = new ArrayBuffer(need);
      t.out = out;
    }
    w.postMessage(t, t.out ? [t.body, t.out] : [t.body]);
  };
  for (const w of pool) {
    w.on('message', ({ id, body, length, out, written }: Task) => {
      const ex = waiting.get(id)!;
      waiting.delete(id);
      idle.push(w);
      const next = queue.shift();
      if (next) dispatch(next);
      buffers.push(body);
      if (out) {
        if (written === undefined || written < 0) void ex.send(400, {}, '').then(() => outs.push(out));
        else void ex.json(200, new Uint8Array(out, 0, written)).then(() => outs.push(out));
        return;
      }
      const n = answerBytes(length);
      if (answer.length < n) answer = Buffer.alloc(n, 0x41);
      void ex.json(200, answer.subarray(0, n));
    });
  }

  const app = uws.App();
  app.any('/*', (res, req) => {
    const ex = new Exchange(res, String(nextId), 'transport', 0n);
    const declared = Number(req.getHeader('content-length')) || 0;
    const contentType = req.getHeader('content-type');
    if (declared > maxBody) {
      void ex.send(413, { Connection: 'close' }, '');
      return;
    }
    let buf = buffers.pop();
    if (!buf || buf.byteLength < declared) buf = new ArrayBuffer(Math.max(declared, 1));
    let body = new Uint8Array(buf);
    let got = 0;
    res.onData((chunk, isLast) => {
      if (ex.answered || ex.aborted) return;
      if (got + chunk.byteLength > maxBody) {
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
      dispatch({ id, body: body.buffer as ArrayBuffer, length: got, contentType });
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
  const work = process.argv[4] ?? 'sha256';
  if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(workers) || workers < 1 || (work !== 'sha256' && work !== 'protect')) {
    process.stderr.write('usage: node dist/bench/load/transport.js <port> <workers> [sha256|protect]\n');
    process.exit(2);
  }
  const server = transportServer(workers, work);
  const bound = await server.listen(port, '127.0.0.1');
  process.stdout.write(`listening ${bound}\n`);
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
}
