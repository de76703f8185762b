/**
 * The vault's recognition (PDQ, src/vault/phash.ts): how often a copy of an original is within a distance
 * of it (true matches), how often a different picture is (false matches), per threshold; and what the
 * hash costs beside a plain decode of the same 12 MP JPEG and beside marking it.
 *
 * True matches: every photograph of ../shared/natural (or BENCH_PHOTOS) as the vault's original, each
 * attack of the fingerprint's set (bench/lib/fingerprint-attacks.ts, the 39 of ATTACKS) plus the
 * recognition's own everyday copies made with the same functions (mild crops, JPEG 70, WebP 90, PNG,
 * metadata stripped, the file as optmark marks it with the fingerprint), each copy's hash against its
 * original's. False matches: every pair of different unmarked pictures across ../shared/natural and
 * ../shared/corpus (those sharp decodes, with PDQ quality >= PDQ_MIN_QUALITY), and every attacked copy
 * against every other photograph's original.
 *
 *   npm run build && node dist/bench/recognition.bench.js [--json FILE]      (BENCH_QUICK=1: fewer photos)
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { embedFingerprint } from '../src/fingerprint/embed.js';
import { protect } from '../src/marking/engine.js';
import { distance, PDQ_MATCH_DISTANCE, PDQ_MIN_QUALITY, perceptualHash } from '../src/vault/phash.js';
import { ATTACKS, type Attack, crop, jpeg, png } from './lib/fingerprint-attacks.js';
import { sourcePhotos } from './lib/photos.js';
import { compare, QUICK } from './lib/report.js';
import { stripJpegMetadata } from './lib/strip-metadata.js';
import { nearest } from '../src/vault/recognition.js';
import { generatedCorpus } from './load/corpus.js';
import { prng } from './load/random.js';

sharp.concurrency(1);
sharp.cache(false);

const CORPUS = fileURLToPath(new URL('../../../shared/corpus', import.meta.url));
const SECRET = new Uint8Array(32).fill(7);
const THRESHOLDS = [8, 16, 24, 31, 36, 40, 44, 48, 52, 56, 64, 72];

/**
 * Files of the corpus that are one picture (Pillow's test photograph of Grace Hopper, in three damaged or
 * odd encodings): their pairs are true duplicates, reported apart from the false matches.
 */
const SAME_PICTURE = [new Set(['pillow_hopper_16bit_qtables.jpg', 'pillow_hopper_idat_after_image_end.png', 'pillow_broken_data_stream.png'])];
const samePicture = (a: string, b: string): boolean => SAME_PICTURE.some((g) => g.has(a) && g.has(b));

/** The everyday copies the vault must recognise, beside the fingerprint's set (same functions). */
const EVERYDAY: Attack[] = [
  { name: 'crop98 random', family: 'mild crop', fn: crop(0.98) },
  { name: 'crop96 random', family: 'mild crop', fn: crop(0.96) },
  { name: 'crop95 centre', family: 'mild crop', fn: crop(0.95, { x: 0.5, y: 0.5 }) },
  { name: 'crop95 random', family: 'mild crop', fn: crop(0.95) },
  { name: 'crop95 corner', family: 'mild crop', fn: crop(0.95, { x: 0, y: 0 }) },
  { name: 'crop90 random', family: 'crop 80-90%', fn: crop(0.9) },
  { name: 'crop80 random', family: 'crop 80-90%', fn: crop(0.8) },
  { name: 'jpeg70', family: 'jpeg', fn: jpeg(70) },
  { name: 'webp90', family: 'webp', fn: async (b) => sharp(b).webp({ quality: 90 }).toBuffer() },
  { name: 'webp lossless', family: 'webp', fn: async (b) => sharp(b).webp({ lossless: true }).toBuffer() },
  { name: 'png', family: 'png', fn: async (b) => png(sharp(b)) },
  {
    name: 'jpeg92+exif, metadata stripped',
    family: 'strip metadata',
    fn: async (b) =>
      stripJpegMetadata(
        await sharp(b)
          .jpeg({ quality: 92 })
          .withMetadata({ exif: { IFD0: { Copyright: 'Example' } } })
          .toBuffer(),
      ),
  },
  {
    name: 'marked (field + fingerprint)',
    family: 'marked',
    fn: async (b) => Buffer.from(protect(await embedFingerprint(b, SECRET, { maxPixels: 40e6 })).bytes),
  },
  {
    name: 'marked, then jpeg80',
    family: 'marked',
    fn: async (b, r) => jpeg(80)(Buffer.from(await embedFingerprint(b, SECRET, { maxPixels: 40e6 })), r),
  },
];

/** What the issue names: resizing, re-encoding, metadata stripping, mild crops (and the marked file). */
const IN_SCOPE = new Set(['none', 'jpeg', 'webp', 'png', 'resize', 'mild crop', 'strip metadata', 'marked']);

interface Copy {
  photo: number;
  attack: string;
  family: string;
  hash: string | null;
}

const args = process.argv.slice(2);
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : undefined;

const photos = await sourcePhotos(QUICK ? 4 : 100);
const originals: Array<{ name: string; bytes: Buffer; hash: string }> = [];
for (const p of photos.inputs) {
  const bytes = typeof p === 'string' ? readFileSync(p) : p;
  const h = await perceptualHash(bytes);
  if (!h) throw new Error(`cannot hash ${String(p)}`);
  originals.push({ name: typeof p === 'string' ? basename(p) : `generated ${originals.length}`, bytes, hash: h.hash });
}
console.log(`# recognition: ${originals.length} originals from ${photos.source}`);

const attacks = [...ATTACKS, ...EVERYDAY];
const copies: Copy[] = [];
for (let i = 0; i < originals.length; i++) {
  const rng = prng(1000 + i);
  for (const a of attacks) {
    const out = await a.fn(originals[i]!.bytes, rng);
    copies.push({ photo: i, attack: a.name, family: a.family, hash: (await perceptualHash(out))?.hash ?? null });
  }
}

// Unmarked pictures: the originals and the corpus files sharp decodes (quality filter as at ingest).
const unmarked: Array<{ name: string; hash: string }> = originals.map((o) => ({ name: o.name, hash: o.hash }));
let lowQuality = 0;
let undecodable = 0;
for (const f of readdirSync(CORPUS).sort()) {
  if (!/\.(jpe?g|png|webp|gif|tiff?|avif)$/i.test(f)) continue;
  const h = await perceptualHash(readFileSync(join(CORPUS, f)));
  if (!h) undecodable++;
  else if (h.quality < PDQ_MIN_QUALITY) lowQuality++;
  else unmarked.push({ name: f, hash: h.hash });
}
const pairs: Array<{ a: string; b: string; d: number }> = [];
const duplicates: Array<{ a: string; b: string; d: number }> = [];
for (let i = 0; i < unmarked.length; i++) {
  for (let j = i + 1; j < unmarked.length; j++) {
    const pair = { a: unmarked[i]!.name, b: unmarked[j]!.name, d: distance(unmarked[i]!.hash, unmarked[j]!.hash) };
    (samePicture(pair.a, pair.b) ? duplicates : pairs).push(pair);
  }
}
const cross: number[] = [];
for (const c of copies) {
  if (!c.hash) continue;
  for (let j = 0; j < originals.length; j++) if (j !== c.photo) cross.push(distance(c.hash, originals[j]!.hash));
}

const trueDist = copies.map((c) => ({ ...c, d: c.hash ? distance(c.hash, originals[c.photo]!.hash) : 257 }));
const rate = (xs: number[], t: number): string => `${((100 * xs.filter((d) => d <= t).length) / Math.max(1, xs.length)).toFixed(2)}%`;
const all = trueDist.map((c) => c.d);
const scope = trueDist.filter((c) => IN_SCOPE.has(c.family)).map((c) => c.d);
const pairD = pairs.map((p) => p.d);

console.log(
  `\ncopies: ${all.length} (${attacks.length} per original; ${scope.length} of the kinds recognition is for); ` +
    `unmarked pictures: ${unmarked.length} (${pairs.length} pairs; corpus files left out: ${undecodable} undecodable, ${lowQuality} of quality < ${PDQ_MIN_QUALITY}); ` +
    `copy vs another original: ${cross.length} pairs\n`,
);
console.log(
  `| distance <= | true matches, all ${attacks.length} kinds | true matches, in scope | false matches, unmarked pairs | false matches, copy vs other original |`,
);
console.log('|---:|---:|---:|---:|---:|');
for (const t of THRESHOLDS) {
  const mark = t === PDQ_MATCH_DISTANCE ? ` **(chosen)**` : '';
  console.log(`| ${t}${mark} | ${rate(all, t)} | ${rate(scope, t)} | ${rate(pairD, t)} | ${rate(cross, t)} |`);
}
const minOf = (xs: number[]): number => xs.reduce((m, x) => Math.min(m, x), 256);
const different = [...pairD, ...cross];
const mean = different.reduce((a, b) => a + b, 0) / different.length;
const sd = Math.sqrt(different.reduce((a, b) => a + (b - mean) ** 2, 0) / different.length);
console.log(`\nsmallest distance between different unmarked pictures: ${minOf(pairD)}; copy vs other original: ${minOf(cross)}`);
console.log(
  `different pictures' distances: mean ${mean.toFixed(1)}, sd ${sd.toFixed(1)}; the chosen ${PDQ_MATCH_DISTANCE} is ${((mean - PDQ_MATCH_DISTANCE) / sd).toFixed(1)} sd below the mean`,
);
for (const p of duplicates) console.log(`  one picture in two files (not a false match): ${p.a} ~ ${p.b}: ${p.d}`);

console.log(`\nper kind of copy, at the chosen distance (${PDQ_MATCH_DISTANCE}): true matches, median and largest distance`);
const families = [...new Set(trueDist.map((c) => c.family))];
console.log('| family | attacks | true matches | median distance | largest |');
console.log('|---|---|---:|---:|---:|');
for (const fam of families) {
  const rows = trueDist.filter((c) => c.family === fam);
  const ds = rows.map((c) => c.d).sort((a, b) => a - b);
  const names = [...new Set(rows.map((c) => c.attack))].join(', ');
  console.log(
    `| ${fam}${IN_SCOPE.has(fam) ? ' *' : ''} | ${names} | ${rate(ds, PDQ_MATCH_DISTANCE)} | ${ds[Math.floor(ds.length / 2)]} | ${ds[ds.length - 1]} |`,
  );
}
console.log('(* the kinds recognition is for: resizing, re-encoding, metadata stripping, mild crops, the marked file)');
const misses = trueDist.filter((c) => IN_SCOPE.has(c.family) && c.d > PDQ_MATCH_DISTANCE);
for (const m of misses) console.log(`  in-scope miss: ${originals[m.photo]!.name} ${m.attack}: ${m.d}`);

if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ copies: trueDist, pairs, cross }, null, 1));

// Cost: a 12 MP JPEG (the load test's generated camera-like file).
const [big] = await generatedCorpus(['jpeg-12mp']);
const bytes = big!.bytes;
await compare(
  `perceptual hash of ${big!.name} (${big!.width}x${big!.height}, ${(bytes.length / 1e6).toFixed(2)} MB)`,
  { name: 'sharp full decode, raw (plain decode)', fn: () => sharp(bytes).raw().toBuffer() },
  [
    { name: 'perceptualHash (PDQ)', fn: () => perceptualHash(bytes) },
    { name: 'mark: protect (the field; file assembled)', fn: () => protect(bytes).bytes },
    { name: 'mark: fingerprint embed + field', fn: async () => protect(await embedFingerprint(bytes, SECRET, { maxPixels: 40e6 })) },
  ],
  { time: 3000, iterations: 5 },
);

// The matching query's floor: one account's hashes scanned in JS (popcount of XOR), as the store does.
const N = 100_000;
const rnd = prng(5);
const hex = (): string => Array.from({ length: 8 }, () => (Math.floor(rnd() * 2 ** 32) >>> 0).toString(16).padStart(8, '0')).join('');
const stored = Array.from({ length: N }, (_, i) => ({ id: `obj${i}`, name: `photo${i}.jpg`, phash: hex(), record: null }));
const probeHash = stored[N - 1]!.phash;
await compare(
  `matching one hash against ${N} stored hashes (in memory, the scan alone)`,
  { name: `distance() on every pair`, fn: () => stored.filter((o) => distance(o.phash, probeHash) <= PDQ_MATCH_DISTANCE).length },
  [{ name: 'nearest() (src/vault/recognition.ts)', fn: () => nearest(stored, probeHash).length }],
  { time: 2000 },
);
