/**
 * Memory under pressure: a fresh server with the default configuration gets N uploads of the largest
 * size it accepts, all at once (protect, then verify). Every answer must be a success or a 503 with
 * Retry-After; the peak RSS must stay under a bound; afterwards RSS should fall back near idle.
 */
import { performance } from 'node:perf_hooks';
import { Client, openLoop } from './client.js';
import { generatedCorpus, incompressiblePng, prepare } from './corpus.js';
import { RssSampler, memory, resetPeak } from './proc.js';
import { startOptmark } from './servers.js';

export interface MemoryWave {
  operation: 'protect' | 'verify';
  uploads: number;
  ok: number;
  overloadedWithRetryAfter: number;
  /** Anything else: other statuses, 503 without Retry-After, transport errors. */
  bad: Record<string, number>;
  peakRssMiB: number;
  wallS: number;
}

export interface MemoryResult {
  uploads: number;
  uploadBytes: number;
  config: string;
  idleRssMiB: number;
  peakRssMiB: number;
  /** RSS once the server has been idle again, and how long it was given. */
  afterRssMiB: number;
  afterIdleS: number;
  /** RSS after `lightTrafficS` of light traffic (1 MP protect, 10 req/s) following the idle period. */
  afterTrafficRssMiB: number;
  lightTrafficS: number;
  /** [seconds idle, RSS MiB] every 2 s after the last wave. */
  afterSeries: Array<[number, number]>;
  waves: MemoryWave[];
  limitMiB: number;
  /** Peak under the limit, only 200 or 503+Retry-After, RSS afterwards (idle, or after light traffic) within 1.25x idle + 64 MiB. */
  pass: { peak: boolean; answers: boolean; settles: boolean };
}

const MIB = 1024 * 1024;
/** The bound: 1.5 GB (decimal), in MiB. */
export const MEMORY_LIMIT_MIB = 1.5e9 / MIB;

export async function memoryTest(opts: {
  uploads: number;
  bytes: number;
  log: (s: string) => void;
  settleS?: number;
  lightTrafficS?: number;
}): Promise<MemoryResult> {
  const image = await incompressiblePng(opts.bytes);
  const server = await startOptmark({ inheritConfig: false });
  const pid = server.target.pid!;
  try {
    await new Promise((r) => setTimeout(r, 1500));
    const idle = memory(pid)!.rss;
    opts.log(`memory: server idle at ${(idle / MIB).toFixed(0)} MiB; ${opts.uploads} concurrent uploads of ${image.bytes.length} bytes`);
    const img = { name: 'incompressible', format: 'png' as const, mimeType: 'image/png', bytes: image.bytes };
    const waves: MemoryWave[] = [];
    let peak = 0;
    for (const operation of ['protect', 'verify'] as const) {
      const req = prepare(operation, img);
      const client = new Client(server.target, opts.uploads);
      resetPeak(pid);
      const sampler = new RssSampler(pid, 20).start();
      const t0 = performance.now();
      const outcomes = await Promise.all(Array.from({ length: opts.uploads }, () => client.send(req, 0, performance.now() - t0, t0, 300_000)));
      const wallS = (performance.now() - t0) / 1000;
      const sampled = sampler.stop();
      const wavePeak = Math.max(sampled, memory(pid)?.hwm ?? 0);
      client.close();
      const bad: Record<string, number> = {};
      let ok = 0;
      let retry = 0;
      for (const o of outcomes) {
        if (o.status === 200) ok++;
        else if (o.status === 503 && o.retryAfter) retry++;
        else {
          const k = o.status === 0 ? 'transport error' : o.status === 503 ? '503 without Retry-After' : String(o.status);
          bad[k] = (bad[k] ?? 0) + 1;
        }
      }
      peak = Math.max(peak, wavePeak);
      waves.push({ operation, uploads: opts.uploads, ok, overloadedWithRetryAfter: retry, bad, peakRssMiB: wavePeak / MIB, wallS });
      opts.log(
        `memory: ${operation}: ${ok} ok, ${retry} x 503 + Retry-After, other ${JSON.stringify(bad)}, peak ${(wavePeak / MIB).toFixed(0)} MiB in ${wallS.toFixed(1)} s`,
      );
    }
    // Idle again: watch RSS for the whole settle time (no early stop: V8 frees big buffers only at its next GC).
    const settleS = opts.settleS ?? 30;
    const t0 = performance.now();
    const series: Array<[number, number]> = [];
    let after = memory(pid)!.rss;
    series.push([0, after / MIB]);
    while ((performance.now() - t0) / 1000 < settleS) {
      await new Promise((r) => setTimeout(r, 2000));
      after = memory(pid)!.rss;
      series.push([(performance.now() - t0) / 1000, after / MIB]);
    }
    const afterIdleS = (performance.now() - t0) / 1000;
    // Then ordinary traffic: small requests make both isolates allocate, so V8 collects the big buffers
    // it was still holding; what stays after that is the allocator keeping pages.
    const [small] = await generatedCorpus(['jpeg-1mp']);
    const light = new Client(server.target, 16);
    const lightReq = prepare('protect', small!);
    const lightS = opts.lightTrafficS ?? 10;
    const run = await openLoop(light, [lightReq], () => 0, {
      rate: 10,
      durationMs: lightS * 1000,
      arrivals: 'uniform',
      drainMs: 10_000,
      seed: 5,
      timeoutMs: 30_000,
    });
    light.close();
    await new Promise((r) => setTimeout(r, 2000));
    const afterTraffic = memory(pid)!.rss;
    opts.log(`memory: RSS ${(afterTraffic / MIB).toFixed(0)} MiB after ${run.outcomes.length} light requests (1 MP protect at 10 req/s for ${lightS} s)`);
    opts.log(`memory: RSS ${(after / MIB).toFixed(0)} MiB after ${afterIdleS.toFixed(0)} s idle (idle before: ${(idle / MIB).toFixed(0)} MiB)`);
    return {
      uploads: opts.uploads,
      uploadBytes: image.bytes.length,
      config: 'defaults (no OPTMARK_* besides host, port, data directory, bootstrap off)',
      idleRssMiB: idle / MIB,
      peakRssMiB: peak / MIB,
      afterRssMiB: after / MIB,
      afterIdleS,
      afterTrafficRssMiB: afterTraffic / MIB,
      lightTrafficS: lightS,
      afterSeries: series.map(([t, m]) => [Math.round(t), Math.round(m)]),
      waves,
      limitMiB: MEMORY_LIMIT_MIB,
      pass: {
        peak: peak / MIB <= MEMORY_LIMIT_MIB,
        answers: waves.every((w) => Object.keys(w.bad).length === 0),
        settles: Math.min(after, afterTraffic) <= idle * 1.25 + 64 * MIB,
      },
    };
  } finally {
    await server.stop();
  }
}
