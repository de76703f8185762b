/**
 * Robustness table for the fingerprint: over ../shared/natural (and any folders given as arguments),
 * embed, attack, detect; then the same attacks on the unmarked originals with several keys for the
 * false-positive count. Writes nothing to disk.
 *
 *   npm run build && node dist/bench/fingerprint-robustness.js [folder ...] [--keys N] [--engine native|reference]
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { decodeBase, examinable, probe } from '../src/fingerprint/decode.js';
import { embedFingerprint } from '../src/fingerprint/embed.js';
import { runCore, type Engine, fingerprintEngine } from '../src/fingerprint/native.js';
import { keyTileFor } from '../src/fingerprint/pattern.js';
import { CORE_PARAMS, FPR } from '../src/fingerprint/params.js';
import { cellTest } from '../src/fingerprint/stats.js';
import { prng } from '../src/capacity/random.js';

sharp.concurrency(1);

/** dist/bench/ -> repo root -> ../shared/natural */
const NATURAL = fileURLToPath(new URL('../../../shared/natural', import.meta.url));

type Attack = (buf: Buffer, rng: () => number) => Promise<Buffer>;

async function dims(buf: Buffer): Promise<{ w: number; h: number }> {
  const m = await sharp(buf).metadata();
  return { w: m.width!, h: m.height! };
}

function crop(areaKept: number, at?: { x: number; y: number }): Attack {
  return async (buf, rng) => {
    const { w, h } = await dims(buf);
    const k = Math.sqrt(areaKept);
    const cw = Math.round(w * k);
    const ch = Math.round(h * k);
    const fx = at ? at.x : rng();
    const fy = at ? at.y : rng();
    return sharp(buf).extract({ left: Math.round((w - cw) * fx), top: Math.round((h - ch) * fy), width: cw, height: ch }).png().toBuffer();
  };
}

const resize = (f: number): Attack => async (buf) => {
  const { w } = await dims(buf);
  return sharp(buf).resize(Math.round(w * f)).png().toBuffer();
};
const jpeg = (q: number): Attack => async (buf) => sharp(buf).jpeg({ quality: q }).toBuffer();
const chain = (...steps: Attack[]): Attack => async (buf, rng) => {
  let b = buf;
  for (const s of steps) b = await s(b, rng);
  return b;
};

const ATTACKS: { name: string; control?: boolean; fn: Attack }[] = [
  { name: 'none', fn: async (b) => b },
  { name: 'jpeg90', fn: jpeg(90) },
  { name: 'jpeg75', fn: jpeg(75) },
  { name: 'jpeg50', fn: jpeg(50) },
  { name: 'jpeg30', fn: jpeg(30) },
  { name: 'resize0.75', fn: resize(0.75) },
  { name: 'resize0.5', fn: resize(0.5) },
  { name: 'crop90 (check position)', fn: crop(0.9, { x: 0.3, y: 0.7 }) },
  { name: 'crop90 random', fn: crop(0.9) },
  { name: 'crop81 random', fn: crop(0.81) },
  { name: 'brightness1.3', fn: async (b) => sharp(b).modulate({ brightness: 1.3 }).png().toBuffer() },
  { name: 'contrast1.5', fn: async (b) => sharp(b).linear(1.5, -64).png().toBuffer() },
  { name: 'crop90+resize0.5+jpeg50', fn: chain(crop(0.9), resize(0.5), jpeg(50)) },
  { name: 'control: rotate5', control: true, fn: async (b) => sharp(b).rotate(5).png().toBuffer() },
  { name: 'control: hflip', control: true, fn: async (b) => sharp(b).flop().png().toBuffer() },
  { name: 'control: crop50', control: true, fn: crop(0.5) },
];


async function psnr(a: Buffer, b: Buffer): Promise<number> {
  const [x, y] = await Promise.all([a, b].map((v) => sharp(v).removeAlpha().raw().toBuffer()));
  let se = 0;
  for (let i = 0; i < x!.length; i++) {
    const d = x![i]! - y![i]!;
    se += d * d;
  }
  const mse = se / x!.length;
  return mse === 0 ? 99 : 10 * Math.log10((255 * 255) / mse);
}

interface Verdict {
  present: boolean;
  confidence: number;
  z: number;
  blocks: number;
  ms: number;
}

/** Decodes once, then tests every key on the same pixels (the null trials differ only by key). */
async function detectMany(buf: Buffer, secrets: Uint8Array[], engine: Engine): Promise<Verdict[]> {
  const head = await probe(buf);
  if (!head || !examinable(head.width, head.height)) return secrets.map(() => ({ present: false, confidence: 0, z: 0, blocks: 0, ms: 0 }));
  const base = await decodeBase(buf, head.width, head.height);
  return secrets.map((secret) => {
    const key = keyTileFor(secret);
    const t0 = performance.now();
    const { out } = runCore({ ...base, sync: key.sync, count: key.count, params: CORE_PARAMS }, engine);
    const t = cellTest(out.cells);
    return { present: t.pValue <= FPR, confidence: t.k / t.n, z: t.t, blocks: t.n, ms: performance.now() - t0 };
  });
}

function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[s.length >> 1]! : NaN;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let keys = 4;
  let engine: Engine = fingerprintEngine();
  const folders: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--keys') keys = Number(args[++i]);
    else if (args[i] === '--engine') engine = args[++i] as Engine;
    else folders.push(args[i]!);
  }
  if (existsSync(NATURAL)) folders.unshift(NATURAL);
  else console.log(`note: ${NATURAL} is missing; only the folders given on the command line are used.`);
  const files = folders.flatMap((d) => readdirSync(d).filter((f) => /\.(png|jpe?g|webp)$/i.test(f)).sort().map((f) => join(d, f)));
  if (!files.length) {
    console.log('no images: pass a folder of PNG/JPEG/WebP photographs.');
    process.exitCode = 1;
    return;
  }
  const markKey = new Uint8Array(32).fill(7);
  const nullKeys = Array.from({ length: keys }, (_, i) => new Uint8Array(32).fill(100 + i));
  const rows = new Map<string, { conf: number[]; z: number[]; hits: number; n: number; nullTrials: number; fps: number; maxNullZ: number; control: boolean }>();
  const psnrs: number[] = [];
  const rng = prng(12345);
  const nrng = prng(54321);
  const ms: number[] = [];
  for (const file of files) {
    const orig = readFileSync(file);
    const marked = Buffer.from(await embedFingerprint(orig, markKey, { maxPixels: 100_000_000 }));
    psnrs.push(await psnr(orig, marked));
    const misses: string[] = [];
    for (const a of ATTACKS) {
      const row = rows.get(a.name) ?? { conf: [], z: [], hits: 0, n: 0, nullTrials: 0, fps: 0, maxNullZ: -Infinity, control: !!a.control };
      rows.set(a.name, row);
      const [v] = await detectMany(await a.fn(marked, rng), [markKey], engine);
      row.n++;
      row.conf.push(v!.confidence);
      row.z.push(v!.z);
      ms.push(v!.ms);
      if (v!.present) row.hits++;
      else if (!a.control) misses.push(`${a.name}(z=${v!.z.toFixed(2)})`);
      for (const u of await detectMany(await a.fn(orig, nrng), nullKeys, engine)) {
        row.nullTrials++;
        if (u.present) row.fps++;
        row.maxNullZ = Math.max(row.maxNullZ, u.z);
      }
    }
    console.log(`${file.split('/').pop()}: PSNR ${psnrs[psnrs.length - 1]!.toFixed(2)} dB${misses.length ? '  MISSED ' + misses.join(' ') : ''}`);
  }
  const pad = (s: string | number, n: number): string => String(s).padStart(n);
  const out = [`\nengine ${engine}, ${files.length} images, ${keys} null keys; decision: p <= ${FPR}`];
  out.push(`${'attack'.padEnd(28)} ${pad('detected', 9)} ${pad('med conf', 9)} ${pad('min conf', 9)} ${pad('min z', 7)} ${pad('med z', 7)} ${pad('FP/trials', 10)} ${pad('max null z', 10)}`);
  let fps = 0;
  let trials = 0;
  for (const [name, r] of rows) {
    fps += r.fps;
    trials += r.nullTrials;
    out.push(
      `${name.padEnd(28)} ${pad(`${r.hits}/${r.n}`, 9)} ${pad(median(r.conf).toFixed(3), 9)} ${pad(Math.min(...r.conf).toFixed(3), 9)} ${pad(Math.min(...r.z).toFixed(2), 7)} ${pad(median(r.z).toFixed(2), 7)} ${pad(`${r.fps}/${r.nullTrials}`, 10)} ${pad(r.maxNullZ.toFixed(2), 10)}`,
    );
  }
  out.push(`PSNR (RGB) min ${Math.min(...psnrs).toFixed(2)} dB, mean ${(psnrs.reduce((a, b) => a + b, 0) / psnrs.length).toFixed(2)} dB`);
  out.push(`false positives: ${fps} of ${trials} unmarked trials (every attack, ${keys} keys)`);
  out.push(`detection core (${engine}) median ${median(ms).toFixed(1)} ms per image at the work resolution`);
  console.log(out.join('\n'));
}

await main();
