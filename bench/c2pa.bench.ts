/**
 * The cost of verify's Content Credentials reading, side by side in one run:
 *  - detection on files without a manifest store (a header walk) against the XMP read verify already does;
 *  - the reference reader (c2pa-wasm): instantiation once, then time and RSS growth per read of the corpus files.
 * Run: npm run build && node dist/bench/c2pa.bench.js [iterations]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { loadC2pa, readC2pa } from '../src/c2pa/reader.js';
import { read } from '../src/marking/engine.js';

const N = Number(process.argv[2] ?? 20);
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
