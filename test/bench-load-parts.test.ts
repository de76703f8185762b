// Parts of the load generator checked on their own: the ideal-queue reference against queueing theory,
// and the open loop's warm-up (unrecorded requests first, meters started at the measured window) against
// a loopback server that answers at once. No time is asserted: only counts, order and model figures.
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, arrivalTimes, openLoop } from '../bench/load/client.js';
import { parseMix, weightedOrder, type PreparedRequest } from '../bench/load/corpus.js';
import { medianFloors } from '../bench/load/floor.js';
import { threadCpu, threadDelta, waitTotals, type ThreadCpu } from '../bench/load/proc.js';
import { idealQueue } from '../bench/load/queue.js';

describe('medianFloors', () => {
  it("takes each field's middle value across processes and keeps every protect reading", () => {
    const f = (protect: number, decode: number, cpu: number) => ({ protect_ms: protect, decode_ms: decode, protect_cpu_ms: cpu, decode_cpu_ms: decode + 1 });
    const m = medianFloors([f(4.1, 47, 7.3), f(5.9, 46, 8.0), f(5.5, 48, 7.5)])!;
    expect(m).toEqual({ protect_ms: 5.5, decode_ms: 47, protect_cpu_ms: 7.5, decode_cpu_ms: 48, protect_ms_runs: [4.1, 5.9, 5.5] });
    expect(medianFloors([f(4.1, 47, 7.3)])!.protect_ms).toBe(4.1);
    expect(medianFloors([])).toBeUndefined();
  });
});

describe('idealQueue', () => {
  it('matches M/G/1 processor sharing: mean response time is D / (1 - rho)', () => {
    for (const rho of [0.3, 0.5, 0.7]) {
      const d = 10;
      const q = idealQueue((rho * 1000) / d, d, 1, 'poisson', 3, 200_000)!;
      expect(q.utilisation).toBeCloseTo(rho, 6);
      expect(q.mean / (d / (1 - rho))).toBeGreaterThan(0.95);
      expect(q.mean / (d / (1 - rho))).toBeLessThan(1.05);
    }
  });

  it('has no tail with evenly spaced arrivals below capacity, even with requests overlapping', () => {
    // 150 req/s of 10 ms on two cores: a gap of 6.7 ms, so two run at once, each on its own core.
    const q = idealQueue(150, 10, 2, 'uniform')!;
    expect(q.p50).toBeCloseTo(10, 6);
    expect(q.p99).toBeCloseTo(10, 6);
  });

  it('shows that Poisson arrivals alone put p99 above 3x p50 at about 55% of two cores', () => {
    const light = idealQueue(43, 9.5, 2, 'poisson')!;
    const busy = idealQueue(110, 9.5, 2, 'poisson')!;
    expect(light.p99 / light.p50).toBeLessThan(2.2);
    expect(busy.utilisation).toBeCloseTo(0.5225, 3);
    expect(busy.p99 / busy.p50).toBeGreaterThan(3);
    expect(busy.p99 / busy.p50).toBeLessThan(4);
  });

  it('gives no figure at or past capacity', () => {
    expect(idealQueue(210, 9.5, 2, 'poisson')).toBeUndefined();
    expect(idealQueue(0, 9.5, 2, 'poisson')).toBeUndefined();
  });
});

describe('threadDelta', () => {
  /** A reading; `wait` in seconds, stored as whole ns as schedstat gives it. */
  const t = (tid: number, cpu: number, wait: number | undefined): ThreadCpu => ({
    tid,
    comm: 'node',
    cpu,
    user: cpu,
    sys: 0,
    waitNs: wait === undefined ? undefined : wait * 1e9,
  });

  it('gives each thread its CPU and run-queue wait between two readings, the main thread named as the event loop', () => {
    const rows = threadDelta(100, [t(100, 1, 0.5), t(101, 2, 0.25)], [t(100, 1.5, 0.75), t(101, 3, 0.5), t(102, 0.25, 0.125)]);
    expect(rows).toEqual([
      { thread: 'node 101', cpu: 1, sys: 0, wait: 0.25 },
      { thread: 'main (event loop) 100', cpu: 0.5, sys: 0, wait: 0.25 },
      { thread: 'node 102', cpu: 0.25, sys: 0, wait: 0.125 }, // born between the readings: counted from zero
    ]);
  });

  it('leaves the wait unknown when a reading has no schedstat', () => {
    expect(threadDelta(100, [t(100, 1, undefined)], [t(100, 2, 0.5)])[0]!.wait).toBeUndefined();
    expect(threadDelta(100, [t(100, 1, 0.5)], [t(100, 2, undefined)])[0]!.wait).toBeUndefined();
  });

  it('sums the run-queue wait of every thread, the main thread apart, even of threads that used no CPU tick', () => {
    const before = [t(100, 1, 0.5), t(101, 2, 0.25)];
    const after = [t(100, 1, 0.75), t(101, 3, 0.5), t(102, 0, 0.125)];
    expect(waitTotals(100, before, after)).toEqual({ all: 0.625, main: 0.25 });
    expect(waitTotals(100, before, undefined)).toBeUndefined();
    expect(waitTotals(100, before, [t(100, 1, 0.75), t(101, 3, undefined)])).toBeUndefined();
  });

  it.runIf(process.platform === 'linux')("reads this process's threads from /proc, the main thread with its run-queue wait", () => {
    const before = threadCpu(process.pid)!;
    const main = before.find((x) => x.tid === process.pid)!;
    expect(main.cpu).toBeGreaterThan(0);
    if (main.waitNs !== undefined) {
      expect(Number.isSafeInteger(main.waitNs) && main.waitNs >= 0).toBe(true);
      const totals = waitTotals(process.pid, before, threadCpu(process.pid))!;
      expect(totals.main).toBeGreaterThanOrEqual(0);
      expect(totals.all).toBeGreaterThanOrEqual(totals.main); // the main thread is one of the process's threads
    }
  });
});

describe('arrivalTimes', () => {
  it('puts exactly the count in the window, sorted, with Poisson gaps (exponential: sd = mean)', () => {
    const t = arrivalTimes(20_000, 100, 'poisson', 9);
    expect(t).toHaveLength(20_000);
    const gaps: number[] = [];
    for (let i = 1; i < t.length; i++) {
      expect(t[i]!).toBeGreaterThanOrEqual(t[i - 1]!);
      gaps.push(t[i]! - t[i - 1]!);
    }
    expect(t[0]!).toBeGreaterThanOrEqual(0);
    expect(t[t.length - 1]!).toBeLessThan(200_000); // 20,000 at 100/s: within 200 s
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length);
    expect(mean).toBeGreaterThan(9.8);
    expect(mean).toBeLessThan(10.2);
    expect(sd / mean).toBeGreaterThan(0.95);
    expect(sd / mean).toBeLessThan(1.05);
    expect(Array.from(arrivalTimes(4, 100, 'uniform', 1))).toEqual([0, 10, 20, 30]);
  });
});

describe('the mix (--mix)', () => {
  it('reads protect=N,verify=N, an operation left out being 0, and refuses anything else', () => {
    expect(parseMix('protect=4,verify=1')).toEqual({ protect: 4, verify: 1 });
    expect(parseMix(' verify=2 , protect=3 ')).toEqual({ protect: 3, verify: 2 });
    expect(parseMix('protect=1')).toEqual({ protect: 1, verify: 0 });
    for (const bad of ['', 'protect', 'protect=-1', 'protect=1.5', 'protect=1,upload=1', 'protect=1,protect=2', 'protect=0,verify=0', 'protect=1000'])
      expect(() => parseMix(bad), bad).toThrow();
  });

  it('sends each kind exactly its share in every full cycle, shuffled, the same order for the same seed', () => {
    const weights = [3, 0, 1, 2];
    const pick = weightedOrder(weights, 11);
    const cycle = 66; // 6 per round, repeated to at least 64
    const counts = [0, 0, 0, 0];
    const first = Array.from({ length: cycle }, (_, i) => pick(i));
    for (let i = 0; i < cycle * 10; i++) counts[pick(i)]!++;
    expect(counts).toEqual([330, 0, 110, 220]);
    expect(Array.from({ length: cycle }, (_, i) => pick(cycle * 3 + i))).toEqual(first);
    expect(first.slice(0, 12)).not.toEqual([0, 0, 0, 2, 3, 3, 0, 0, 0, 2, 3, 3]);
    expect(Array.from({ length: cycle }, (_, i) => weightedOrder(weights, 11)(i))).toEqual(first);
    expect(() => weightedOrder([0, 0], 1)).toThrow();
    expect(() => weightedOrder([1.5], 1)).toThrow();
  });
});

describe('openLoop warm-up', () => {
  let server: Server;
  let port = 0;
  const seen: number[] = [];
  beforeAll(async () => {
    // Answers each request as soon as its head arrives (bodies are tiny) and records the request's order.
    server = createServer((sock: Socket) => {
      let buf = '';
      sock.on('data', (d) => {
        buf += d.toString('latin1');
        for (;;) {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
          if (buf.length < end + 4 + len) return;
          seen.push(Number(buf.slice(end + 4, end + 4 + len)));
          buf = buf.slice(end + 4 + len);
          sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('sends the warm-up requests, records only the measured window (rate x duration requests), and starts the meters once at its start', async () => {
    const req = (n: number): PreparedRequest => ({
      label: `r${n}`,
      operation: 'protect',
      path: '/',
      image: 'x',
      imageBytes: 1,
      body: Buffer.from(String(n)),
      contentType: 'text/plain',
    });
    const requests = [req(0), req(1)];
    // Counts only, none depending on the machine's speed: room for every request in flight at once (when
    // timers fire late the arrivals bunch up, and with a smaller bound some would be counted "not sent"
    // instead of sent: 50 measured instead of 60 on a busy machine), and a drain deadline and request
    // timeout no answer from a loopback server comes near.
    const client = new Client({ name: 't', url: new URL(`http://127.0.0.1:${port}`), key: undefined, pid: undefined }, 1_000);
    const plan = { rate: 200, durationMs: 300, warmupMs: 200, arrivals: 'uniform' as const, drainMs: 120_000, seed: 1, timeoutMs: 120_000 };
    const warm = 40; // 200 req/s for 0.2 s
    const starts = { length: 100 }; // and 60 more for 0.3 s
    let metersStarted = 0;
    let sentBeforeMeters = -1;
    seen.length = 0;
    const run = await openLoop(client, requests, (i) => (i < warm ? 0 : 1), {
      ...plan,
      onMeasureStart: () => {
        metersStarted++;
        sentBeforeMeters = seen.length; // requests the server has seen so far: warm-up ones only
      },
    });
    client.close();
    expect(warm).toBe(40);
    expect(starts.length).toBe(100);
    expect(metersStarted).toBe(1);
    expect(sentBeforeMeters).toBeLessThanOrEqual(warm);
    // Every request went out; only the measured ones came back as outcomes, all of the measured kind.
    expect(seen.filter((k) => k === 0)).toHaveLength(warm);
    expect(seen.filter((k) => k === 1)).toHaveLength(starts.length - warm);
    expect(run.scheduled).toBe(starts.length - warm);
    expect(run.outcomes).toHaveLength(starts.length - warm);
    for (const o of run.outcomes) {
      expect(o.kind).toBe(1);
      expect(o.status).toBe(200);
      expect(o.doneAt).toBeGreaterThanOrEqual(0);
    }
  });

  it('measures exactly rate x duration requests with Poisson arrivals too', async () => {
    const req: PreparedRequest = { label: 'p', operation: 'protect', path: '/', image: 'x', imageBytes: 1, body: Buffer.from('1'), contentType: 'text/plain' };
    const client = new Client({ name: 't', url: new URL(`http://127.0.0.1:${port}`), key: undefined, pid: undefined }, 1_000);
    for (const seed of [1, 2, 3]) {
      const run = await openLoop(client, [req], () => 0, {
        rate: 150,
        durationMs: 200,
        warmupMs: 100,
        arrivals: 'poisson',
        drainMs: 120_000,
        seed,
        timeoutMs: 120_000,
      });
      expect(run.outcomes).toHaveLength(30);
      expect(run.outcomes.every((o) => o.status === 200)).toBe(true);
    }
    client.close();
  });
});

describe('several instances (bench load --url a --url b)', () => {
  it('spreads the requests over every URL in turn, each instance getting its share', async () => {
    const counts = [0, 0, 0];
    const servers = counts.map((_, i) =>
      createServer((sock: Socket) => {
        let buf = '';
        sock.on('data', (d) => {
          buf += d.toString('latin1');
          // A request is its head and a one-byte body.
          for (let end = buf.indexOf('\r\n\r\n'); end >= 0 && buf.length >= end + 5; end = buf.indexOf('\r\n\r\n')) {
            buf = buf.slice(end + 5);
            counts[i]!++;
            sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
          }
        });
      }),
    );
    const ports: number[] = [];
    for (const s of servers) {
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
      ports.push((s.address() as { port: number }).port);
    }
    try {
      const urls = ports.map((p) => new URL(`http://127.0.0.1:${p}`));
      const client = new Client({ name: 't', url: urls[0]!, urls, key: undefined, pid: undefined }, 1_000);
      const req: PreparedRequest = {
        label: 'p',
        operation: 'protect',
        path: '/',
        image: 'x',
        imageBytes: 1,
        body: Buffer.from('1'),
        contentType: 'text/plain',
      };
      const run = await openLoop(client, [req], () => 0, {
        rate: 300,
        durationMs: 200,
        warmupMs: 0,
        arrivals: 'uniform',
        drainMs: 120_000,
        seed: 1,
        timeoutMs: 120_000,
      });
      client.close();
      expect(run.outcomes).toHaveLength(60);
      expect(run.outcomes.every((o) => o.status === 200)).toBe(true);
      expect(counts).toEqual([20, 20, 20]);
    } finally {
      for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
    }
  });
});
