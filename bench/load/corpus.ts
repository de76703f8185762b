/**
 * The load test's inputs: a generated corpus of photo-like images at realistic sizes (deterministic, so
 * figures from different machines are comparable), or the images in a folder the user names; and the
 * multipart request bodies built from them once, before any timing starts.
 *
 * The synthetic photo is a low-frequency colour field plus luma texture at two scales and, for the lossy
 * formats, per-pixel sensor noise; its encoded sizes land where camera output does (12 MP JPEG q90
 * about 3.4 MB, 12 MP PNG about 21 MB, 12 MP WebP q80 about 2.1 MB).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, extname, join } from 'node:path';
import sharp from 'sharp';
import { prng } from './random.js';

/** Bump when the generator changes so stale cached files are not reused. */
const CORPUS_VERSION = 1;

export interface CorpusImage {
  /** Stable short name, e.g. `jpeg-12mp`. */
  name: string;
  format: 'jpeg' | 'png' | 'webp';
  mimeType: string;
  width: number;
  height: number;
  /** Where the bytes live on disk (for the floor child process). */
  path: string;
  bytes: Buffer;
}

interface Spec {
  name: string;
  format: CorpusImage['format'];
  width: number;
  height: number;
  /** Per-pixel noise amplitude (lossy formats) and luma texture strength. */
  noise: number;
  texture: number;
}

/** The default corpus: 1, 12 and 24 MP JPEG; 12 MP PNG and WebP. */
export const DEFAULT_SPECS: readonly Spec[] = [
  { name: 'jpeg-1mp', format: 'jpeg', width: 1152, height: 864, noise: 6, texture: 0.25 },
  { name: 'jpeg-12mp', format: 'jpeg', width: 4000, height: 3000, noise: 6, texture: 0.25 },
  { name: 'jpeg-24mp', format: 'jpeg', width: 6000, height: 4000, noise: 6, texture: 0.25 },
  // No per-pixel noise: deflate cannot compress it, and real 12 MP PNGs are about 60% of raw size.
  { name: 'png-12mp', format: 'png', width: 4000, height: 3000, noise: 0, texture: 0.2 },
  { name: 'webp-12mp', format: 'webp', width: 4000, height: 3000, noise: 6, texture: 0.25 },
];

export const MIME: Record<CorpusImage['format'], string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp' };
const EXT: Record<CorpusImage['format'], string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };

export { prng };

async function noiseLayer(width: number, height: number, divisor: number, channels: 1 | 3, rand: () => number): Promise<Buffer> {
  const lw = Math.max(2, Math.ceil(width / divisor));
  const lh = Math.max(2, Math.ceil(height / divisor));
  const small = Buffer.allocUnsafe(lw * lh * channels);
  for (let i = 0; i < small.length; i++) small[i] = Math.floor(rand() * 256);
  return sharp(small, { raw: { width: lw, height: lh, channels } })
    .resize(width, height, { kernel: 'cubic' })
    .raw()
    .toBuffer();
}

/** Raw RGB pixels of a photo-like image. */
export async function syntheticPhoto(width: number, height: number, noise: number, texture: number, seed = 42): Promise<Buffer> {
  const rand = prng(seed);
  const colour = await noiseLayer(width, height, 300, 3, rand);
  const mid = await noiseLayer(width, height, 24, 1, rand);
  const fine = await noiseLayer(width, height, 3, 1, rand);
  const out = Buffer.allocUnsafe(width * height * 3);
  for (let p = 0, i = 0; p < width * height; p++) {
    const t = (mid[p]! - 128) * 0.35 + (fine[p]! - 128) * texture + (noise > 0 ? (rand() + rand() - 1) * noise : 0);
    for (let c = 0; c < 3; c++, i++) {
      const v = colour[i]! + t;
      out[i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
  return out;
}

async function encode(spec: Spec): Promise<Buffer> {
  const raw = await syntheticPhoto(spec.width, spec.height, spec.noise, spec.texture);
  const img = sharp(raw, { raw: { width: spec.width, height: spec.height, channels: 3 } });
  switch (spec.format) {
    case 'jpeg':
      // Cameras write an Exif block; the edit has to step over it.
      return img
        .withExif({ IFD0: { Make: 'optmark-bench', Model: 'synthetic photo', Software: 'optmark bench corpus' } })
        .jpeg({ quality: 90 })
        .toBuffer();
    case 'png':
      return img.png().toBuffer();
    case 'webp':
      return img.webp({ quality: 80 }).toBuffer();
  }
}

/**
 * The one place generated corpus files are cached between runs (they take seconds each to make; the
 * full set is about 33 MB): `$XDG_CACHE_HOME/optmark/` (by default `~/.cache/optmark/`), one folder per
 * generator version. `optmark bench load --clear-cache` removes it. When the home folder cannot be
 * written, the temporary directory is used instead.
 */
export function corpusCacheRoot(): string {
  const base = process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache');
  return join(base, 'optmark');
}

const CACHE_PREFIX = 'bench-corpus-v';
/** Where the cache lived before it moved (the temporary directory); --clear-cache removes it too. */
const LEGACY_PREFIX = 'optmark-bench-corpus-v';

let cacheDir: string | undefined;

/** The cache folder of this generator version (made on first use). */
export function corpusCacheDir(): string {
  if (cacheDir) return cacheDir;
  const preferred = join(corpusCacheRoot(), `${CACHE_PREFIX}${CORPUS_VERSION}`);
  try {
    mkdirSync(preferred, { recursive: true });
    cacheDir = preferred;
  } catch {
    cacheDir = join(tmpdir(), `${LEGACY_PREFIX}${CORPUS_VERSION}`);
    mkdirSync(cacheDir, { recursive: true });
  }
  return cacheDir;
}

function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? folderBytes(path) : statSync(path).size;
  }
  return total;
}

/** Removes every cached corpus (all generator versions, and the old location); returns what went. */
export function clearCorpusCache(): { removed: string[]; bytes: number } {
  const found: string[] = [];
  for (const [root, prefix] of [
    [corpusCacheRoot(), CACHE_PREFIX],
    [tmpdir(), LEGACY_PREFIX],
  ] as const) {
    if (!existsSync(root)) continue;
    for (const name of readdirSync(root)) if (name.startsWith(prefix)) found.push(join(root, name));
  }
  let bytes = 0;
  for (const dir of found) {
    bytes += folderBytes(dir);
    rmSync(dir, { recursive: true, force: true });
  }
  cacheDir = undefined;
  return { removed: found, bytes };
}

/** Writes a file atomically (temp name, then rename), so concurrent runs never read half a file. */
function writeAtomic(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path);
}

/** The generated corpus (or the named subset of it), made on first use and cached (corpusCacheDir). */
export async function generatedCorpus(names?: readonly string[], log: (s: string) => void = () => {}): Promise<CorpusImage[]> {
  const dir = corpusCacheDir();
  const specs = names ? DEFAULT_SPECS.filter((s) => names.includes(s.name)) : DEFAULT_SPECS;
  if (names)
    for (const n of names)
      if (!specs.some((s) => s.name === n)) throw new Error(`no corpus image named ${n}; known: ${DEFAULT_SPECS.map((s) => s.name).join(', ')}`);
  const out: CorpusImage[] = [];
  for (const spec of specs) {
    const path = join(dir, `${spec.name}.${EXT[spec.format]}`);
    if (!existsSync(path)) {
      const t = Date.now();
      writeAtomic(path, await encode(spec));
      log(`corpus: generated ${spec.name} in ${Date.now() - t} ms`);
    }
    out.push({ name: spec.name, format: spec.format, mimeType: MIME[spec.format], width: spec.width, height: spec.height, path, bytes: readFileSync(path) });
  }
  return out;
}

/** Every JPEG, PNG or WebP file directly in `dir` that is at most `maxBytes` (sniffed, not by extension). */
export async function folderCorpus(dir: string, maxBytes: number, log: (s: string) => void = () => {}): Promise<CorpusImage[]> {
  const out: CorpusImage[] = [];
  const used = new Set<string>();
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    const st = statSync(path);
    if (!st.isFile()) continue;
    if (st.size > maxBytes) {
      log(`corpus: skipping ${entry} (${st.size} bytes is over the ${maxBytes}-byte upload limit)`);
      continue;
    }
    const bytes = readFileSync(path);
    const format = sniff(bytes);
    if (!format) continue;
    const meta = await sharp(bytes)
      .metadata()
      .catch(() => undefined);
    let name =
      basename(entry, extname(entry))
        .replace(/[^A-Za-z0-9._-]/g, '_')
        .slice(0, 40) || 'image';
    while (used.has(name)) name += '_';
    used.add(name);
    out.push({ name, format, mimeType: MIME[format], width: meta?.width ?? 0, height: meta?.height ?? 0, path, bytes });
  }
  if (out.length === 0) throw new Error(`no JPEG, PNG or WebP files of at most ${maxBytes} bytes in ${dir}`);
  return out;
}

function sniff(b: Buffer): CorpusImage['format'] | undefined {
  if (b.length > 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length > 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return 'png';
  if (b.length > 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return undefined;
}

/**
 * A valid PNG of close to `targetBytes` whose pixels do not compress (random RGB, stored deflate blocks):
 * the worst case the upload limit admits, for the memory test.
 */
export async function incompressiblePng(targetBytes: number): Promise<{ path: string; bytes: Buffer }> {
  const dir = corpusCacheDir();
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `incompressible-${targetBytes}.png`);
  if (existsSync(path)) return { path, bytes: readFileSync(path) };
  const width = 2048;
  const row = width * 3 + 1; // filter byte
  // Stored deflate: 5 bytes per 65535-byte block; zlib header, IDAT chunking and the rest stay under 64 KiB.
  const budget = targetBytes - 64 * 1024;
  const height = Math.max(1, Math.floor(budget / (row * (1 + 5 / 65535))));
  const raw = Buffer.allocUnsafe(width * height * 3);
  const rand = prng(7);
  for (let i = 0; i < raw.length; i += 4) raw.writeUInt32LE((rand() * 4294967296) >>> 0, i);
  const bytes = await sharp(raw, { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 0, adaptiveFiltering: false })
    .toBuffer();
  if (bytes.length > targetBytes) throw new Error(`memory-test PNG came out ${bytes.length} bytes, over ${targetBytes}`);
  writeAtomic(path, bytes);
  return { path, bytes };
}

/** One prepared request: the whole multipart body, built once and reused for every send. */
export interface PreparedRequest {
  /** e.g. `protect jpeg-12mp`. */
  label: string;
  operation: 'protect' | 'verify';
  path: string;
  image: string;
  imageBytes: number;
  body: Buffer;
  contentType: string;
}

/** Requests of each operation the mix sends per image, relative to each other (protect=3,verify=1: three protects per verify). */
export interface MixWeights {
  protect: number;
  verify: number;
}

/** `protect=3,verify=1` as given to `--mix`; an operation left out gets 0. Throws a message on anything else. */
export function parseMix(raw: string): MixWeights {
  const mix: MixWeights = { protect: 0, verify: 0 };
  const seen = new Set<string>();
  for (const item of raw.split(',').map((s) => s.trim())) {
    const m = /^(protect|verify)=(\d{1,3})$/.exec(item);
    if (!m) throw new Error(`expects protect=N,verify=N with whole numbers 0-999, got ${JSON.stringify(item)}`);
    if (seen.has(m[1]!)) throw new Error(`gives ${m[1]} twice`);
    seen.add(m[1]!);
    mix[m[1] as keyof MixWeights] = Number(m[2]);
  }
  if (mix.protect + mix.verify === 0) throw new Error('needs a weight above 0');
  return mix;
}

export function mixText(mix: MixWeights): string {
  if (mix.verify === 0) return 'protect only';
  if (mix.protect === 0) return 'verify only';
  return mix.protect === mix.verify ? 'protect and verify equally often' : `${mix.protect} protect per ${mix.verify} verify`;
}

/**
 * A seeded shuffled order over kinds, kind k appearing weights[k] times per cycle and the cycle repeated
 * to at least 64 entries before the shuffle: every 64 or so requests carry the mix's exact shares.
 */
export function weightedOrder(weights: readonly number[], seed: number): (i: number) => number {
  const cycle = weights.reduce((a, b) => a + b, 0);
  if (!(cycle > 0) || weights.some((w) => !Number.isInteger(w) || w < 0)) throw new Error(`weights must be whole numbers, not all 0: ${weights.join(',')}`);
  const reps = Math.max(1, Math.ceil(64 / cycle));
  const order: number[] = [];
  for (let r = 0; r < reps; r++) weights.forEach((w, k) => order.push(...new Array<number>(w).fill(k)));
  const rand = prng(seed);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return (i) => order[i % order.length]!;
}

const BOUNDARY = '----optmark-bench-7d1f0c2a9b';

export function prepare(operation: 'protect' | 'verify', image: Pick<CorpusImage, 'name' | 'format' | 'mimeType' | 'bytes'>): PreparedRequest {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="${image.name}.${EXT[image.format]}"\r\nContent-Type: ${image.mimeType}\r\n\r\n`,
    'latin1',
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`, 'latin1');
  return {
    label: `${operation} ${image.name}`,
    operation,
    path: `/api/v1/${operation}`,
    image: image.name,
    imageBytes: image.bytes.length,
    body: Buffer.concat([head, image.bytes, tail]),
    contentType: `multipart/form-data; boundary=${BOUNDARY}`,
  };
}
