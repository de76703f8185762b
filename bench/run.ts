/**
 * Runs every micro-benchmark (dist/bench/*.bench.js) in sequence, each in a child process of its own so
 * one benchmark's heap and JIT state do not skew the next. Arguments filter by name (substring).
 *
 *   npm run bench                      every benchmark
 *   npm run bench -- body multipart    those whose file name contains "body" or "multipart"
 *   npm run bench -- --list            list them
 *   BENCH_QUICK=1 npm run bench        short runs (smoke)
 *
 * The load test is separate: `./bin/optmark bench load` (npm run bench:load).
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));

function run(file: string): Promise<{ code: number; seconds: number }> {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { stdio: 'inherit' });
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), seconds: Number(process.hrtime.bigint() - t0) / 1e9 }));
  });
}

async function main(args: string[]): Promise<number> {
  const filters = args.filter((a) => !a.startsWith('-'));
  const all = readdirSync(HERE)
    .filter((f) => f.endsWith('.bench.js'))
    .sort();
  const chosen = filters.length ? all.filter((f) => filters.some((x) => f.includes(x))) : all;
  if (args.includes('--list')) {
    for (const f of all) console.log(f.replace(/\.bench\.js$/, ''));
    return 0;
  }
  if (chosen.length === 0) {
    console.error(`no benchmark matches ${filters.join(', ')}; have: ${all.map((f) => f.replace(/\.bench\.js$/, '')).join(', ')}`);
    return 2;
  }
  const results: Array<{ name: string; code: number; seconds: number }> = [];
  for (const f of chosen) {
    const name = basename(f, '.bench.js');
    console.log(`\n# ${name} (${join('dist/bench', f)})`);
    results.push({ name, ...(await run(join(HERE, f))) });
  }
  console.log('\n# summary');
  for (const r of results)
    console.log(`${r.code === 0 ? 'ok    ' : 'FAILED'} ${r.name.padEnd(24)} ${r.seconds.toFixed(1)} s${r.code === 0 ? '' : ` (exit ${r.code})`}`);
  return results.every((r) => r.code === 0) ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
