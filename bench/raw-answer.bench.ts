/**
 * Raw protect answers against JSON, side by side on one real server (issue #21 point 4): a 12 MP JPEG
 * protected with `Accept: application/json` and with `Accept: image/*`, interleaved in rounds, measuring
 * bytes on the wire (status line, headers and body as received) and the server's CPU per protect (user +
 * system time of the server process, all its threads, from /proc between batches).
 * Run: npm run build && node dist/bench/raw-answer.bench.js [rounds] [per-batch]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { cpuMs, freePort } from './lib/proc.js';

const ROUNDS = Number(process.argv[2] ?? 4);
const PER_BATCH = Number(process.argv[3] ?? 5);
const CLI = resolve(import.meta.dirname, '..', 'src', 'cli.js');

interface Got {
  status: number;
  wireBytes: number;
}

function post(port: number, key: string, body: Buffer, boundary: string, accept: string): Promise<Got> {
  return new Promise((ok, fail) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/v1/protect',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': body.length, Accept: accept },
      },
      (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => {
          n += c.length;
        });
        res.on('end', () => {
          // Status line and header block as sent (raw header names and values, CRLFs).
          let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n`.length + 2;
          for (let i = 0; i < res.rawHeaders.length; i += 2) head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`.length;
          ok({ status: res.statusCode ?? 0, wireBytes: head + n });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

const dataDir = mkdtempSync(join(tmpdir(), 'optmark-raw-bench-'));
const port = await freePort();
const server: ChildProcess = spawn(process.execPath, [CLI, 'serve'], {
  env: {
    PATH: process.env.PATH,
    OPTMARK_HOST: '127.0.0.1',
    OPTMARK_PORT: String(port),
    OPTMARK_DATA_DIR: dataDir,
    OPTMARK_POOL_SIZE: '1',
    OPTMARK_LOG_LEVEL: 'warn',
    OPTMARK_FINGERPRINT_DETECT: 'off',
  },
  stdio: ['ignore', 'ignore', 'inherit'],
});
try {
  let key: string | undefined;
  for (let i = 0; i < 600 && !key; i++) {
    await new Promise((r) => setTimeout(r, 100));
    try {
      key = /(om_live_[0-9A-Za-z]{43})/.exec(readFileSync(join(dataDir, 'bootstrap-key.txt'), 'utf8'))?.[1];
    } catch {}
  }
  if (!key) throw new Error('the server did not write its start-up key');
  for (let i = 0; i < 600; i++) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 100));
  }

  // A 12 MP JPEG of about 3.8 MB (noise, so it is the size a camera file is, not a flat test card).
  const jpeg = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: '#6a7b8c', noise: { type: 'gaussian', mean: 0, sigma: 30 } } })
    .jpeg({ quality: 85 })
    .toBuffer();
  const boundary = 'optmark-bench-boundary';
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="photo.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    jpeg,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  console.log(`12 MP JPEG: ${jpeg.length} bytes; ${ROUNDS} rounds of ${PER_BATCH} JSON then ${PER_BATCH} raw protects, interleaved`);
  const pid = server.pid!;
  const kinds = { json: 'application/json', raw: 'image/*' } as const;
  const total = { json: { cpu: 0, wire: 0, n: 0 }, raw: { cpu: 0, wire: 0, n: 0 } };
  // One of each first: the worker's compiled paths and memory are warm for both.
  for (const accept of Object.values(kinds)) await post(port, key, body, boundary, accept);
  for (let r = 0; r < ROUNDS; r++) {
    for (const kind of ['json', 'raw'] as const) {
      const before = cpuMs(pid);
      for (let i = 0; i < PER_BATCH; i++) {
        const got = await post(port, key, body, boundary, kinds[kind]);
        if (got.status !== 200) throw new Error(`${kind} protect answered ${got.status}`);
        total[kind].wire += got.wireBytes;
        total[kind].n++;
      }
      total[kind].cpu += cpuMs(pid) - before;
    }
  }
  const per = (k: 'json' | 'raw') => ({ wire: total[k].wire / total[k].n, cpu: total[k].cpu / total[k].n });
  const json = per('json');
  const raw = per('raw');
  console.log(`JSON answer: ${json.wire.toFixed(0)} bytes on the wire, ${json.cpu.toFixed(1)} ms server CPU per protect`);
  console.log(`raw answer:  ${raw.wire.toFixed(0)} bytes on the wire, ${raw.cpu.toFixed(1)} ms server CPU per protect`);
  console.log(`raw / JSON: bytes ${(raw.wire / json.wire).toFixed(3)}, server CPU ${(raw.cpu / json.cpu).toFixed(3)}`);
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
