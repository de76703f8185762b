/** Process figures the side-by-side benchmarks read: a free loopback port, a process's CPU from /proc. */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const TICK_MS = 10; // USER_HZ 100 on Linux

/** A TCP port free on 127.0.0.1 now (another process may take it before it is used). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** User + system CPU of a process (all its threads), in ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_MS;
}
