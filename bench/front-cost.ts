/**
 * What a proxy in front of optmark costs (issue #20 point 4: uWS cannot serve pipelined POSTs, a proxy in
 * front can): server CPU per protect of a 12 MP JPEG straight to optmark, through the cheapest proxy Node.js
 * can be (a byte relay of two sockets, no HTTP parsing: the floor of any front written in JavaScript), and
 * through HAProxy (mode http) when it is installed; proxy CPU included, in interleaved rounds, as ratios to
 * straight. `npm run build && node dist/bench/front-cost.js [seconds per round] [rounds]`.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { cpuMs } from './lib/proc.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');

async function ready(url: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {}
    if (i > 300) throw new Error(`${url} not ready`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const RELAY = `const net=require('net');const [p,t]=process.argv.slice(1).map(Number);
net.createServer({noDelay:true},(c)=>{const u=net.connect(t,'127.0.0.1');c.pipe(u);u.pipe(c);c.on('error',()=>u.destroy());u.on('error',()=>c.destroy());}).listen(p,'127.0.0.1');`;

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 6);
  const rounds = Number(process.argv[3] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'optmark-front-bench-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const env = {
    ...process.env,
    OPTMARK_DATA_DIR: join(dir, 'data'),
    OPTMARK_PORT: String(port),
    OPTMARK_HOST: '127.0.0.1',
    OPTMARK_BOOTSTRAP: 'off',
    OPTMARK_LOG_LEVEL: 'warn',
  };
  const procs: ChildProcess[] = [];
  const server = spawn(process.execPath, [CLI, 'serve'], { env, stdio: 'ignore' });
  procs.push(server);
  try {
    await ready(`http://127.0.0.1:${port}/readyz`);
    execFileSync(process.execPath, [CLI, 'account', 'create', 'bench', '--plan', 'pro'], { env, stdio: 'ignore' });
    execFileSync(process.execPath, [CLI, 'account', 'set-limits', 'bench', '--protect', '10000000'], { env, stdio: 'ignore' });
    const key = execFileSync(process.execPath, [CLI, 'key', 'issue', 'bench'], { env }).toString().trim().split('\n').pop()!.trim();
    const ways: Array<{ name: string; port: number; pids: number[] }> = [{ name: 'straight to optmark', port, pids: [server.pid!] }];
    const relay = spawn(process.execPath, ['-e', RELAY, String(port + 1), String(port)], { stdio: 'ignore' });
    procs.push(relay);
    await ready(`http://127.0.0.1:${port + 1}/healthz`);
    ways.push({ name: 'Node.js byte relay', port: port + 1, pids: [server.pid!, relay.pid!] });
    const bin =
      ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p)) ??
      (spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim() || undefined);
    if (bin) {
      const cfg = join(dir, 'haproxy.cfg');
      writeFileSync(
        cfg,
        `defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\nfrontend f\n  bind 127.0.0.1:${port + 2}\n  default_backend b\nbackend b\n  server s1 127.0.0.1:${port}\n`,
      );
      const h = spawn(bin, ['-db', '-f', cfg], { stdio: 'ignore' });
      procs.push(h);
      await ready(`http://127.0.0.1:${port + 2}/healthz`);
      ways.push({ name: 'HAProxy 2.x (mode http)', port: port + 2, pids: [server.pid!, h.pid!] });
    } else console.log('HAProxy is not installed: measured without it');
    const jpeg = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: { r: 120, g: 140, b: 160 } } })
      .composite([
        {
          input: { create: { width: 4000, height: 3000, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 8 } } },
          blend: 'overlay',
        },
      ])
      .jpeg({ quality: 92 })
      .toBuffer();
    const boundary = 'frontCostBench';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
      jpeg,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const drive = async (to: number, ms: number): Promise<number> => {
      let n = 0;
      const end = performance.now() + ms;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (performance.now() < end) {
            const r = await fetch(`http://127.0.0.1:${to}/api/v1/protect`, {
              method: 'POST',
              headers: { Authorization: `Bearer ${key}`, 'Content-Type': `multipart/form-data; boundary=${boundary}` },
              body,
            });
            await r.arrayBuffer();
            if (r.status !== 200) throw new Error(`protect answered ${r.status}`);
            n++;
          }
        }),
      );
      return n;
    };
    console.log(`protect of a ${(jpeg.length / 1e6).toFixed(2)} MB 12 MP JPEG, 8 clients, ${rounds} interleaved rounds of ${seconds} s each way`);
    for (const w of ways) await drive(w.port, 1500);
    const totals = ways.map(() => ({ n: 0, cpu: 0 }));
    for (let r = 0; r < rounds; r++) {
      for (const [i, w] of ways.entries()) {
        const c0 = w.pids.reduce((t, p) => t + cpuMs(p), 0);
        totals[i]!.n += await drive(w.port, seconds * 1000);
        totals[i]!.cpu += w.pids.reduce((t, p) => t + cpuMs(p), 0) - c0;
      }
    }
    const base = totals[0]!.cpu / totals[0]!.n;
    for (const [i, w] of ways.entries()) {
      const per = totals[i]!.cpu / totals[i]!.n;
      console.log(
        `${w.name.padEnd(26)} ${String(totals[i]!.n).padStart(5)} protects, CPU per protect ${per.toFixed(2)} ms = ${(per / base).toFixed(2)}x straight`,
      );
    }
  } finally {
    for (const p of procs.reverse()) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
