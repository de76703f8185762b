/**
 * In-process floors for one file, by the formula the project's acceptance capacity check uses:
 * protect = copy + SHA-256 + base64 + JSON bytes (median of 25);
 * decode = sharp, one libvips thread, resize to 1024 wide, raw (median of 7).
 *
 * Run as its own process so the load generator's heap does not colour the figure:
 *   node dist/bench/load/floor.js <file>      -> {"protect_ms": .., "decode_ms": ..}
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';

export interface Floors {
  /** Wall-clock medians, as the check computes them. */
  protect_ms: number;
  decode_ms: number;
  /** The same medians in CPU time of this process (less sensitive to other load on the machine). */
  protect_cpu_ms: number;
  decode_cpu_ms: number;
  /** When combined from several processes (medianFloors): each process's protect_ms, in run order. */
  protect_ms_runs?: number[];
}

/**
 * The field-by-field median of floors measured in separate processes. One fresh process's protect floor
 * moves by 20-30% from run to run (where its 15 MB of allocations per iteration land), and the CPU
 * target is judged against it, so the load test measures it three times and takes the middle.
 */
export function medianFloors(runs: Floors[]): Floors | undefined {
  if (runs.length === 0) return undefined;
  const mid = (f: (x: Floors) => number): number => median(runs.map(f));
  return {
    protect_ms: mid((x) => x.protect_ms),
    decode_ms: mid((x) => x.decode_ms),
    protect_cpu_ms: mid((x) => x.protect_cpu_ms),
    decode_cpu_ms: mid((x) => x.decode_cpu_ms),
    protect_ms_runs: runs.map((x) => x.protect_ms),
  };
}

const median = (a: number[]): number => a.sort((x, y) => x - y)[a.length >> 1]!;

/** The protect floor's body: what any protect must at least do with the bytes. */
export function floorBody(buf: Buffer): Buffer {
  const c = Buffer.from(buf);
  const h = createHash('sha256').update(c).digest('hex');
  const b64 = c.toString('base64');
  return Buffer.concat([Buffer.from('{"imageBase64":"'), Buffer.from(b64, 'latin1'), Buffer.from(`","sha256":"${h}"}`)]);
}

/** The decode floor: the bare decode verify's detector needs. */
export function floorDecode(buf: Buffer): Promise<Buffer> {
  return sharp(buf).resize({ width: 1024 }).raw().toBuffer();
}

export async function measureFloors(buf: Buffer): Promise<Floors> {
  const t: number[] = [];
  const tc: number[] = [];
  for (let i = 0; i < 25; i++) {
    const c = process.cpuUsage();
    const s = process.hrtime.bigint();
    const body = floorBody(buf);
    t.push(Number(process.hrtime.bigint() - s) / 1e6);
    const used = process.cpuUsage(c);
    tc.push((used.user + used.system) / 1000);
    if (!body.length) throw new Error('empty body');
  }
  sharp.concurrency(1);
  const d: number[] = [];
  const dc: number[] = [];
  for (let i = 0; i < 7; i++) {
    const c = process.cpuUsage();
    const s = process.hrtime.bigint();
    await floorDecode(buf);
    d.push(Number(process.hrtime.bigint() - s) / 1e6);
    const used = process.cpuUsage(c);
    dc.push((used.user + used.system) / 1000);
  }
  return { protect_ms: median(t), decode_ms: median(d), protect_cpu_ms: median(tc), decode_cpu_ms: median(dc) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node dist/bench/load/floor.js <image>\n');
    process.exit(2);
  }
  console.log(JSON.stringify(await measureFloors(readFileSync(file))));
}
