/**
 * Side-by-side tinybench groups: every group has one baseline and its alternatives, run in the same
 * process one after another, and prints each one's latency with its ratio to the baseline.
 */
import { Bench } from 'tinybench';

export interface Contender {
  name: string;
  fn: () => unknown;
}

export interface GroupOptions {
  /** Milliseconds each contender runs for at least (default 1000; BENCH_QUICK=1 divides by 10). */
  time?: number;
  /** Iterations each contender runs at least (default 10). */
  iterations?: number;
  /** Extra note printed under the table. */
  note?: string;
}

export interface Row {
  name: string;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  opsPerSec: number;
  samples: number;
  /** This contender's median latency over the baseline's. */
  ratio: number;
}

export const QUICK = process.env.BENCH_QUICK === '1';

/** Runs `baseline` and the others in one tinybench group and prints a table with ratios to the baseline. */
export async function compare(title: string, baseline: Contender, others: Contender[], opts: GroupOptions = {}): Promise<Row[]> {
  const time = Math.max(20, Math.round((opts.time ?? 1000) / (QUICK ? 10 : 1)));
  const bench = new Bench({ time, iterations: QUICK ? 2 : (opts.iterations ?? 10), warmup: true });
  for (const c of [baseline, ...others]) bench.add(c.name, c.fn);
  await bench.run();
  const rows: Row[] = [];
  for (const task of bench.tasks) {
    const r = task.result;
    if (r?.state !== 'completed') {
      const why = r && 'error' in r ? String((r as { error?: unknown }).error) : 'did not complete';
      throw new Error(`${title}: ${task.name} failed: ${why}`);
    }
    rows.push({
      name: task.name,
      meanMs: r.latency.mean,
      p50Ms: r.latency.p50,
      p99Ms: r.latency.p99,
      opsPerSec: r.throughput.mean,
      samples: r.latency.samplesCount,
      ratio: 0,
    });
  }
  const base = rows[0]!.p50Ms;
  for (const row of rows) row.ratio = row.p50Ms / base;
  printTable(title, rows, opts.note);
  return rows;
}

/** Formats a row table the same way for every benchmark. */
export function printTable(title: string, rows: Row[], note?: string): void {
  const w = Math.max(8, ...rows.map((r) => r.name.length));
  const out = [
    `\n## ${title}`,
    `${'contender'.padEnd(w)}  ${'p50 ms'.padStart(10)}  ${'mean ms'.padStart(10)}  ${'p99 ms'.padStart(10)}  ${'ops/s'.padStart(10)}  ${'x baseline'.padStart(10)}`,
  ];
  for (const r of rows) {
    out.push(`${r.name.padEnd(w)}  ${fmt(r.p50Ms)}  ${fmt(r.meanMs)}  ${fmt(r.p99Ms)}  ${fmt(r.opsPerSec)}  ${fmt(r.ratio)}`);
  }
  if (note) out.push(note);
  console.log(out.join('\n'));
}

function fmt(n: number): string {
  const s = n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n >= 0.1 ? n.toFixed(2) : n.toFixed(4);
  return s.padStart(10);
}
