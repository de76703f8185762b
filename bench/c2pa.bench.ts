/**
 * The cost of Content Credentials, side by side in one run:
 *  - detection on files without a manifest store (a header walk) against the XMP read verify already does;
 *  - the reference reader (c2pa-wasm): instantiation once, then time and RSS growth per read of the corpus files;
 *  - protect's update manifest (OPTMARK_C2PA=update) against the plain edit of the same file (the engine alone),
 *    interleaved, as a ratio;
 *  - memory over many calls: RSS sampled across MEMORY_CALLS reads and MEMORY_CALLS updates (does it plateau?).
 * Run: npm run build && node dist/bench/c2pa.bench.js [iterations] [memory-calls]
 */
import { join } from 'node:path';
import sharp from 'sharp';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { loadC2paIdentity } from '../src/c2pa/identity.js';
import { loadC2pa, readC2pa } from '../src/c2pa/reader.js';
import { protect, read } from '../src/marking/engine.js';
import { type CredentialsPolicy, protectWithCredentials } from '../src/pipeline/credentials.js';

const N = Number(process.argv[2] ?? 20);
const MEMORY_CALLS = Number(process.argv[3] ?? 240);
const CORPUS = join(process.cwd(), '..', 'shared', 'corpus');
const mb = (n: number) => (n / 1e6).toFixed(1);

function time(label: string, n: number, fn: () => unknown): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) fn();
  const per = (performance.now() - t) / n;
  console.log(`${label.padEnd(48)} ${(per * 1000).toFixed(1)} µs/call`);
  return per;
}

const plain = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: '#777' } })
  .jpeg()
  .toBuffer();
console.log(`12 MP JPEG without credentials: ${plain.length} bytes`);
const xmpRead = time('read() (XMP, what verify already does)', 200, () => read(plain));
const detect = time('hasManifestStore (detection only)', 200, () => hasManifestStore('jpeg', plain));
console.log(`detection / read() = ${(detect / xmpRead).toFixed(3)}`);

let rss = process.memoryUsage().rss;
let t = performance.now();
await loadC2pa();
console.log(`wasm reader instantiation: ${(performance.now() - t).toFixed(0)} ms, RSS +${mb(process.memoryUsage().rss - rss)} MB`);
for (const name of ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg']) {
  const bytes = readFileSync(join(CORPUS, name));
  t = performance.now();
  await readC2pa('jpeg', bytes);
  const first = performance.now() - t;
  rss = process.memoryUsage().rss;
  t = performance.now();
  for (let i = 0; i < N; i++) await readC2pa('jpeg', bytes);
  console.log(
    `${name} (${bytes.length} B): first ${first.toFixed(0)} ms, then ${((performance.now() - t) / N).toFixed(1)} ms/read over ${N}, RSS after ${mb(process.memoryUsage().rss)} MB (+${mb(process.memoryUsage().rss - rss)} MB over the ${N} reads)`,
  );
}

// protect with an update manifest against the plain edit, interleaved so that both see the same machine.
const dataDir = mkdtempSync(join(tmpdir(), 'optmark-c2pa-bench-'));
const identity = await loadC2paIdentity({ dataDir });
const update: CredentialsPolicy = { mode: 'update', identity: async () => identity };
for (const name of ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg']) {
  const bytes = new Uint8Array(readFileSync(join(CORPUS, name)));
  await protectWithCredentials(bytes, {}, update); // first call: compiled paths
  let plainMs = 0;
  let updateMs = 0;
  let plainCpu = 0;
  let updateCpu = 0;
  let grown = 0;
  const cpu = (): number => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  for (let i = 0; i < N; i++) {
    let c = cpu();
    t = performance.now();
    protect(bytes).bytes;
    plainMs += performance.now() - t;
    plainCpu += cpu() - c;
    c = cpu();
    t = performance.now();
    const out = await protectWithCredentials(bytes, {}, update);
    updateMs += performance.now() - t;
    updateCpu += cpu() - c;
    grown = out.pieces[0]!.length - protect(bytes).bytes.length;
  }
  console.log(
    `${name}: plain edit ${(plainMs / N).toFixed(2)} ms wall / ${(plainCpu / N).toFixed(2)} ms CPU, with update manifest ` +
      `${(updateMs / N).toFixed(1)} ms wall / ${(updateCpu / N).toFixed(1)} ms CPU (ratio ${(updateMs / plainMs).toFixed(0)}x wall, ` +
      `${(updateCpu / plainCpu).toFixed(0)}x CPU), manifest store +${grown} B over the plain edit, ${N} each`,
  );
}

// Memory over many calls: does the wasm heap plateau, or grow with every call?
const sample = async (label: string, fn: () => Promise<unknown>): Promise<void> => {
  const points: string[] = [];
  for (let i = 1; i <= MEMORY_CALLS; i++) {
    await fn();
    if (i % Math.max(1, Math.floor(MEMORY_CALLS / 6)) === 0) points.push(`${i}:${mb(process.memoryUsage().rss)}`);
  }
  console.log(`${label} RSS (MB) after n calls: ${points.join(' ')}`);
};
const cawg = new Uint8Array(readFileSync(join(CORPUS, 'c2pa_C_with_CAWG_data.jpg')));
await sample(`reads x${MEMORY_CALLS}  `, () => readC2pa('jpeg', cawg));
await sample(`updates x${MEMORY_CALLS}`, () => protectWithCredentials(cawg, {}, update));
rmSync(dataDir, { recursive: true, force: true });
