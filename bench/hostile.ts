/**
 * The measurements of issue #20, against a real server started here: what the hostile files and clients
 * cost it. `npm run build && node dist/bench/hostile.js` (about a minute). Prints, per attack, the
 * figures the issue gave: peak RSS rise, the worker's time (the answer's Server-Timing `work`), the
 * output's size, and how many answers came back (directly and, when HAProxy is installed, through it), and
 * what 13 slow bodies hold of the in-flight budget while normal protects run beside them.
 * `OPTMARK_BENCH_ROOT=/path/to/other/checkout node dist/bench/hostile.js` measures another built checkout.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';

/** The checkout whose server is measured: this one, or OPTMARK_BENCH_ROOT (another built checkout, for a before/after). */
const ROOT = process.env.OPTMARK_BENCH_ROOT ?? resolve(import.meta.dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');
const MiB = 1024 * 1024;

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)) >>> 0, 8 + data.length);
  return out;
}

/** The fuzzer's chunk: an iTXt XMP packet of `size` bytes, stored compressed. */
function xmpChunk(size: number): Buffer {
  const ns = 'xmlns:x="adobe:ns:meta/" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:plus="http://ns.useplus.org/ldf/xmp/1.0/"';
  const pre = Buffer.from(`<x:xmpmeta ${ns}><rdf:RDF><rdf:Description rdf:about="" plus:Z="`);
  const post = Buffer.from('"/></rdf:RDF></x:xmpmeta>');
  const x = Buffer.concat([pre, Buffer.alloc(size - pre.length - post.length, 0x41), post]);
  return chunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'), deflateSync(x, { level: 9 })]));
}

const withChunks = (png: Buffer, chunks: Buffer[]): Buffer => Buffer.concat([png.subarray(0, 33), ...chunks, png.subarray(33)]);

function form(image: Buffer, boundary = 'hostileBench', type = 'image/png'): Buffer {
  return Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.${type.slice(6)}"\r\nContent-Type: ${type}\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
}

function rss(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * 4096;
}

async function post(
  port: number,
  key: string,
  endpoint: string,
  image: Buffer,
  type = 'image/png',
): Promise<{ status: number; body: Buffer; workMs: number | undefined; ms: number }> {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/api/v1/${endpoint}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'multipart/form-data; boundary=hostileBench' },
    body: form(image, 'hostileBench', type),
  });
  const body = Buffer.from(await r.arrayBuffer());
  const timing = r.headers.get('server-timing') ?? '';
  const work = /work;dur=([\d.]+)/.exec(timing);
  return { status: r.status, body, workMs: work ? Number(work[1]) : undefined, ms: performance.now() - t0 };
}

/** Sends `n` copies of a request on one connection at once; counts the status lines that come back. */
function pipelined(port: number, request: Buffer, n: number, waitMs: number): Promise<{ answers: number; ok: number }> {
  return new Promise((res) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    const done = (): void => {
      s.destroy();
      res({ answers: got.split('HTTP/1.1 ').length - 1, ok: got.split('HTTP/1.1 200').length - 1 });
    };
    const timer = setTimeout(done, waitMs);
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (got.split('HTTP/1.1 ').length - 1 >= n) {
        clearTimeout(timer);
        setTimeout(done, 200);
      }
    });
    s.on('close', () => {
      clearTimeout(timer);
      done();
    });
    s.on('error', () => undefined);
    s.write(Buffer.concat(Array<Buffer>(n).fill(request)));
  });
}

/** HAProxy (mode http) on `port` in front of `backend`, when it is installed (docs/operating.md). */
function haproxy(dir: string, port: number, backend: number): ChildProcess | undefined {
  const bin =
    ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'].find((p) => existsSync(p)) ??
    (spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim() || undefined);
  if (!bin) return undefined;
  const cfg = join(dir, 'haproxy.cfg');
  writeFileSync(
    cfg,
    `defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\nfrontend f\n  bind 127.0.0.1:${port}\n  default_backend b\nbackend b\n  server s1 127.0.0.1:${backend}\n`,
  );
  return spawn(bin, ['-db', '-f', cfg], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), 'optmark-hostile-bench-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const env = {
    ...process.env,
    OPTMARK_DATA_DIR: data,
    OPTMARK_PORT: String(port),
    OPTMARK_HOST: '127.0.0.1',
    OPTMARK_BOOTSTRAP: 'off',
    OPTMARK_LOG_LEVEL: 'warn',
    // As deployed behind a proxy (compose.yaml): every client has the proxy's address.
    OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS: '0',
  };
  const server = spawn(process.execPath, [CLI, 'serve'], { env, stdio: 'ignore' });
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200) break;
      } catch {}
      if (i > 300) throw new Error('server not ready');
      await new Promise((r) => setTimeout(r, 100));
    }
    execFileSync(process.execPath, [CLI, 'account', 'create', 'bench', '--plan', 'pro'], { env });
    execFileSync(process.execPath, [CLI, 'account', 'set-limits', 'bench', '--protect', '1000000', '--verify', '1000000'], { env });
    const key = execFileSync(process.execPath, [CLI, 'key', 'issue', 'bench'], { env }).toString().trim().split('\n').pop()!.trim();
    const png = await sharp({ create: { width: 640, height: 480, channels: 3, background: { r: 90, g: 120, b: 150 } } })
      .composite([
        {
          input: { create: { width: 640, height: 480, channels: 3, background: { r: 0, g: 0, b: 0 }, noise: { type: 'gaussian', mean: 128, sigma: 30 } } },
          blend: 'overlay',
        },
      ])
      .png()
      .toBuffer();
    const pid = server.pid!;
    console.log(`optmark ${ROOT}: server pid ${pid}, idle RSS ${(rss(pid) / MiB).toFixed(0)} MB (OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS=0, as behind a proxy)`);

    // 1. Many compressed XMP chunks, each inflating to just under 16 MiB.
    for (const n of [64, 512]) {
      const bomb = withChunks(png, Array<Buffer>(n).fill(xmpChunk(16 * MiB - 64)));
      const base = rss(pid);
      let peak = base;
      const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 20);
      const v = await post(port, key, 'verify', bomb);
      const p = await post(port, key, 'protect', bomb);
      clearInterval(sampler);
      console.log(
        `1. ${n} compressed XMP chunks x 16 MiB (${(bomb.length / 1e6).toFixed(1)} MB upload): verify ${v.status} ${JSON.parse(v.body.toString()).code ?? ''}, protect ${p.status}; peak RSS rise ${((peak - base) / MiB).toFixed(0)} MB`,
      );
    }
    // 2. Compressed chunks just over the per-packet bound, which only a decoder would inflate.
    const plain = await post(port, key, 'verify', png);
    console.log(`2. plain verify: ${plain.status}, worker ${plain.workMs?.toFixed(0)} ms, answer ${plain.ms.toFixed(0)} ms`);
    for (const n of [8, 16, 64]) {
      const slow = withChunks(png, Array<Buffer>(n).fill(xmpChunk(16 * MiB + 1)));
      const v = await post(port, key, 'verify', slow);
      console.log(
        `2. ${n} chunks of 16 MiB + 1 (${(slow.length / 1e6).toFixed(2)} MB): verify ${v.status} ${JSON.parse(v.body.toString()).code ?? ''}, worker ${v.workMs?.toFixed(0)} ms, answer ${v.ms.toFixed(0)} ms`,
      );
    }
    // A packet within the budget: read by our parser, no longer handed to the decoder.
    const within = await post(port, key, 'verify', withChunks(png, [xmpChunk(16 * MiB - 64)]));
    console.log(
      `2. one compressed packet of 16 MiB - 64 (within the budget): verify ${within.status}, worker ${within.workMs?.toFixed(0)} ms, answer ${within.ms.toFixed(0)} ms`,
    );
    // 3. Amplification: one 16 MiB compressed packet in a small upload.
    const amp = withChunks(png, [xmpChunk(16 * MiB - 64)]);
    const a = await post(port, key, 'protect', amp);
    const aj = JSON.parse(a.body.toString()) as { code?: string; imageBase64?: string };
    console.log(
      `3. protect of a ${(amp.length / 1024).toFixed(0)} KB upload holding a 16 MiB compressed packet: ${a.status} ${aj.code ?? ''}` +
        (aj.imageBase64 ? `, output ${(Buffer.from(aj.imageBase64, 'base64').length / 1e6).toFixed(1)} MB, JSON ${(a.body.length / 1e6).toFixed(1)} MB` : ''),
    );
    // 4. Pipelining: POSTs (their answers come from a worker) and GETs.
    const body = form(png);
    const request = Buffer.concat([
      Buffer.from(
        `POST /api/v1/verify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=hostileBench\r\nContent-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]);
    for (const n of [5, 50]) {
      const r = await pipelined(port, request, n, 10_000);
      console.log(`4. ${n} POSTs pipelined on one connection: ${r.answers} answers (${r.ok} x 200)`);
    }
    const g = await pipelined(port, Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'), 50, 5_000);
    console.log(`4. 50 GET /healthz pipelined: ${g.answers} answers`);
    const frontPort = port + 1;
    const front = haproxy(data, frontPort, port);
    if (!front) console.log('4. HAProxy is not installed: no measurement through a proxy');
    else {
      try {
        for (let i = 0; ; i++) {
          try {
            if ((await fetch(`http://127.0.0.1:${frontPort}/healthz`)).status === 200) break;
          } catch {}
          if (i > 100) throw new Error('HAProxy not ready');
          await new Promise((r) => setTimeout(r, 100));
        }
        for (const n of [5, 50]) {
          const r = await pipelined(frontPort, request, n, 300_000);
          console.log(`4. ${n} POSTs pipelined on one connection through HAProxy: ${r.answers} answers (${r.ok} x 200)`);
        }
      } finally {
        front.kill('SIGKILL');
      }
    }
    // 5. Slow bodies: 13 connections, each of its own account, declaring 25 MiB and sending a byte a second;
    // meanwhile normal protects for 12 s. The server runs as behind a proxy (no per-address share), so only
    // the budget and the per-account shares stand in their way. The rate floor answers the slow ones 408
    // after 5 s; what they hold meanwhile is printed from /readyz.
    const slowKeys = Array.from({ length: 13 }, (_, i) => {
      execFileSync(process.execPath, [CLI, 'account', 'create', `slowpoke${i}`, '--plan', 'pro'], { env });
      return execFileSync(process.execPath, [CLI, 'key', 'issue', `slowpoke${i}`], { env })
        .toString()
        .trim()
        .split('\n')
        .pop()!
        .trim();
    });
    const slow = slowKeys.map((slowKey) => {
      const s = connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      s.write(
        `POST /api/v1/protect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${slowKey}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${25 * MiB}\r\n\r\n`,
      );
      const t = setInterval(() => s.writable && s.write('x'), 1000);
      return { s, t };
    });
    await new Promise((r) => setTimeout(r, 1000));
    const held = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { inflight: { requests: number; bytes: number; capacity: number } };
    console.log(
      `5. 13 slow bodies open: ${held.inflight.requests} requests hold ${(held.inflight.bytes / MiB).toFixed(0)} MiB of the ${(held.inflight.capacity / MiB).toFixed(0)} MiB in-flight budget`,
    );
    // Four clients at once, each protecting a 4 MB photo (about 11 MB of room with its answer).
    const photo = await sharp({ create: { width: 2400, height: 1800, channels: 3, background: '#888', noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
      .jpeg({ quality: 95 })
      .toBuffer();
    const statuses: Record<number, number> = {};
    const t0 = performance.now();
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        while (performance.now() - t0 < 12_000) {
          const r = await post(port, key, 'protect', photo, 'image/jpeg');
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        }
      }),
    );
    for (const { s, t } of slow) {
      clearInterval(t);
      s.destroy();
    }
    const total = Object.values(statuses).reduce((t, n) => t + n, 0);
    console.log(
      `5. 13 slow bodies of 13 accounts (25 MiB declared, 1 B/s); protects of a ${(photo.length / 1e6).toFixed(1)} MB photo by 4 clients over 12 s beside them: ${JSON.stringify(statuses)}, ${((100 * (statuses[503] ?? 0)) / total).toFixed(0)}% 503`,
    );
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.on('close', r));
    rmSync(data, { recursive: true, force: true });
  }
}

await main();
