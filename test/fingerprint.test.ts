/**
 * Fingerprint layer: behaviour on synthetic textured images (no ../shared needed), the secret file,
 * native/reference agreement, and the Kodak set when ../shared/natural is present.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { detectFingerprint, embedFingerprint, fingerprintEngine, loadFingerprintSecret } from '../src/fingerprint/index.js';
import { decodeBase, isDecodeTimeout } from '../src/fingerprint/decode.js';
import { jpeg, jpegFrameSize } from '../src/formats/jpeg.js';
import { runCore, runCore2 } from '../src/fingerprint/native.js';
import { keyTileFor } from '../src/fingerprint/v1/key.js';
import { keyTileV2For } from '../src/fingerprint/v2/key.js';
import { WORK_SHORT_SIDE } from '../src/fingerprint/params.js';
import { CORE_PARAMS } from '../src/fingerprint/v1/params.js';
import { CORE2_PARAMS } from '../src/fingerprint/v2/params.js';
import { binomialTail, cellTest, signFlipTail } from '../src/fingerprint/stats.js';
import { psnr, texturedImage } from './helpers/fingerprint.js';
import { ROOT, requireBuild } from './helpers/server.js';

const MAX_PIXELS = 40_000_000;
const SECRET = new Uint8Array(32).fill(3);
const OTHER = new Uint8Array(32).fill(4);
const NATURAL = fileURLToPath(new URL('../../shared/natural', import.meta.url));
const CORPUS = fileURLToPath(new URL('../../shared/corpus', import.meta.url));

const attacks: Record<string, (b: Buffer) => Promise<Buffer>> = {
  jpeg50: (b) => sharp(b).jpeg({ quality: 50 }).toBuffer(),
  resize50: async (b) =>
    sharp(b)
      .resize(Math.round((await sharp(b).metadata()).width! / 2))
      .png()
      .toBuffer(),
  crop90: async (b) => {
    const m = await sharp(b).metadata();
    const k = Math.sqrt(0.9);
    const cw = Math.round(m.width! * k);
    const ch = Math.round(m.height! * k);
    return sharp(b)
      .extract({ left: Math.round((m.width! - cw) * 0.3), top: Math.round((m.height! - ch) * 0.7), width: cw, height: ch })
      .png()
      .toBuffer();
  },
  brightness13: (b) => sharp(b).modulate({ brightness: 1.3 }).png().toBuffer(),
};

describe('fingerprint on synthetic images', async () => {
  const orig = await texturedImage(640, 448, 11);
  const marked = Buffer.from(await embedFingerprint(orig, SECRET, { maxPixels: MAX_PIXELS }));

  it('keeps PSNR >= 40 dB and the format', async () => {
    expect(await psnr(orig, marked)).toBeGreaterThanOrEqual(40);
    expect((await sharp(marked).metadata()).format).toBe('png');
  });

  it('detects the unattacked mark', async () => {
    const d = await detectFingerprint(marked, SECRET, { maxPixels: MAX_PIXELS });
    expect(d).toMatchObject({ present: true });
    expect(d.blocks).toBeGreaterThan(0);
    expect(d.pValue).toBeLessThanOrEqual(1e-6);
  });

  for (const [name, attack] of Object.entries(attacks)) {
    it(`detects the mark after ${name} and not on the unmarked image after ${name}`, async () => {
      const hit = await detectFingerprint(await attack(marked), SECRET, { maxPixels: MAX_PIXELS });
      expect(hit.present, `z=${hit.z}`).toBe(true);
      expect(hit.blocks).toBeGreaterThan(0);
      const miss = await detectFingerprint(await attack(orig), SECRET, { maxPixels: MAX_PIXELS });
      expect(miss.present).toBe(false);
      expect(miss.blocks).toBeGreaterThan(0);
    });
  }

  it('does not detect with another key', async () => {
    expect((await detectFingerprint(marked, OTHER, { maxPixels: MAX_PIXELS })).present).toBe(false);
  });

  it('re-encodes JPEG and lossless WebP in their own format, keeping the mark', async () => {
    const jpg = await sharp(orig).jpeg({ quality: 90 }).toBuffer();
    const mj = await embedFingerprint(jpg, SECRET, { maxPixels: MAX_PIXELS });
    expect((await sharp(mj).metadata()).format).toBe('jpeg');
    expect((await detectFingerprint(mj, SECRET, { maxPixels: MAX_PIXELS })).present).toBe(true);
    const webp = await sharp(orig).webp({ lossless: true }).toBuffer();
    const mw = await embedFingerprint(webp, SECRET, { maxPixels: MAX_PIXELS });
    expect((await sharp(mw).metadata()).format).toBe('webp');
    expect(await psnr(webp, mw)).toBeGreaterThanOrEqual(40);
    expect((await detectFingerprint(mw, SECRET, { maxPixels: MAX_PIXELS })).present).toBe(true);
  });

  it('keeps the input XMP and EXIF', async () => {
    const xmp =
      '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/" dc:format="fixture-xmp"/></rdf:RDF></x:xmpmeta>';
    for (const fmt of ['jpeg', 'png', 'webp'] as const) {
      const input = await sharp(orig)
        .withExif({ IFD0: { Copyright: 'fixture-exif' } })
        .withXmp(xmp)
        .toFormat(fmt)
        .toBuffer();
      const out = await embedFingerprint(input, SECRET, { maxPixels: MAX_PIXELS });
      const m = await sharp(out).metadata();
      expect(m.xmp?.toString(), fmt).toContain('fixture-xmp');
      expect(m.exif?.toString('latin1'), fmt).toContain('fixture-exif');
    }
  });

  it('native and reference engines agree within the stated tolerance', async (ctx) => {
    if (fingerprintEngine() !== 'native') ctx.skip();
    const key = keyTileFor(SECRET);
    for (const buf of [marked, await attacks.crop90!(marked), orig]) {
      const m = await sharp(buf).metadata();
      const base = await decodeBase(buf, m.width!, m.height!);
      const input = { ...base, sync: key.sync, count: key.count, params: CORE_PARAMS };
      const n = runCore(input, 'native');
      const r = runCore(input, 'reference');
      expect(n.engine).toBe('native');
      expect(r.engine).toBe('reference');
      // Tolerance (docs/fingerprint.md): same scale and integer shift, sub-pixel shift within 1e-4 px,
      // sync z within 1e-4, cell correlations within 1e-4 of the largest |cell|, same sign count.
      expect(n.out.scale).toBe(r.out.scale);
      expect(n.out.tier).toBe(r.out.tier);
      expect(Math.abs(n.out.dx - r.out.dx)).toBeLessThan(1e-4);
      expect(Math.abs(n.out.dy - r.out.dy)).toBeLessThan(1e-4);
      expect(Math.abs(n.out.syncZ - r.out.syncZ)).toBeLessThan(1e-4);
      const big = Math.max(...Array.from(r.out.cells, Math.abs));
      for (let i = 0; i < r.out.cells.length; i++) expect(Math.abs(n.out.cells[i]! - r.out.cells[i]!)).toBeLessThan(1e-4 * big);
      expect(cellTest(n.out.cells).k).toBe(cellTest(r.out.cells).k);
    }
  });

  it('version 1 gives the same answer on the prefiltered picture version 2 hands over, on both engines', async () => {
    const key = keyTileFor(SECRET);
    const k2 = keyTileV2For(SECRET);
    for (const buf of [await attacks.crop90!(marked), orig]) {
      const m = await sharp(buf).metadata();
      const base = await decodeBase(buf, m.width!, m.height!);
      for (const engine of ['native', 'reference'] as const) {
        const kept = new Float32Array(base.width * base.height);
        const in2 = { ...base, workShort: WORK_SHORT_SIDE, native: 0, a: k2.a, harmonics: k2.harmonics, b: k2.b, c: k2.c, params: CORE2_PARAMS };
        runCore2({ ...in2, keepPrefiltered: kept }, engine);
        expect(kept.some((v) => v !== 0)).toBe(true);
        const input = { ...base, sync: key.sync, count: key.count, params: CORE_PARAMS };
        const own = runCore(input, engine).out;
        const handed = runCore({ ...input, prefiltered: kept }, engine).out;
        expect(handed.scale).toBe(own.scale);
        expect(handed.syncZ).toBe(own.syncZ);
        expect(Array.from(handed.cells)).toEqual(Array.from(own.cells));
      }
    }
  });
});

describe('fingerprint limits', () => {
  it('reports blocks 0 for tiny, over-budget and undecodable input, and never throws', async () => {
    const tiny = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080' } })
      .png()
      .toBuffer();
    expect(await detectFingerprint(tiny, SECRET, { maxPixels: MAX_PIXELS })).toMatchObject({ present: false, confidence: 0, blocks: 0 });
    const big = await texturedImage(400, 300, 5);
    expect(await detectFingerprint(big, SECRET, { maxPixels: 100_000 })).toMatchObject({ present: false, blocks: 0 });
    expect(await detectFingerprint(new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2]), SECRET, { maxPixels: MAX_PIXELS })).toMatchObject({
      present: false,
      blocks: 0,
    });
  });

  it("reads a JPEG's size from its frame header as the decoder's header read does (verify skips that read)", async () => {
    const kinds = [
      await sharp(await texturedImage(400, 300, 5))
        .jpeg({ quality: 90 })
        .toBuffer(),
      await sharp(await texturedImage(301, 203, 6))
        .jpeg({ progressive: true, chromaSubsampling: '4:4:4' })
        .toBuffer(),
      await sharp(await texturedImage(333, 250, 7))
        .grayscale()
        .jpeg()
        .withMetadata({ orientation: 6 })
        .toBuffer(),
    ];
    const corpus = existsSync(CORPUS) ? readdirSync(CORPUS).filter((f) => f.endsWith('.jpg')) : [];
    let compared = 0;
    for (const bytes of [...kinds, ...corpus.map((f) => readFileSync(join(CORPUS, f)))]) {
      let clean: Uint8Array;
      try {
        clean = jpeg.decoderInput(bytes);
      } catch {
        continue; // damaged before the scan: not examined either way
      }
      const m = await sharp(clean, { failOn: 'none' })
        .metadata()
        .catch(() => undefined);
      if (!m?.width) continue;
      expect(jpegFrameSize(clean), 'frame size').toEqual({ width: m.width, height: m.height });
      compared++;
    }
    expect(compared).toBeGreaterThanOrEqual(kinds.length);
    // Over the pixel budget by its frame header alone: not examined.
    expect(await detectFingerprint(kinds[0]!, SECRET, { maxPixels: 100_000 })).toMatchObject({ present: false, blocks: 0 });
  });

  it('refuses to embed with typed errors', async () => {
    const big = await texturedImage(400, 300, 5);
    await expect(embedFingerprint(big, SECRET, { maxPixels: 100_000 })).rejects.toMatchObject({ code: 'limit_exceeded' });
    await expect(embedFingerprint(new Uint8Array([1, 2, 3, 4]), SECRET, { maxPixels: MAX_PIXELS })).rejects.toMatchObject({ code: 'damaged_image' });
    const tiny = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080' } })
      .png()
      .toBuffer();
    await expect(embedFingerprint(tiny, SECRET, { maxPixels: MAX_PIXELS })).rejects.toMatchObject({ code: 'limit_exceeded' });
  });
});

describe('a decode that cannot finish', () => {
  it('a libvips timeout is told apart from undecodable pixels (isDecodeTimeout); an undecodable file is not examined', async () => {
    // A real timeout: a blur far beyond 1 s of work on any machine (a few MB, nothing read from disk).
    const slow = await sharp({ create: { width: 4000, height: 4000, channels: 3, background: '#808080' } })
      .blur(200)
      .timeout({ seconds: 1 })
      .raw()
      .toBuffer()
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(String(slow)).toMatch(/^Error: timeout: /);
    expect(isDecodeTimeout(slow)).toBe(true);
    // A PNG cut after its header: libvips cannot decode it, the same on every run.
    const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const garbled = Buffer.concat([png.subarray(0, 33), png.subarray(png.length - 12)]);
    const broken = await decodeBase(garbled, 300, 200).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(broken).toBeInstanceOf(Error);
    expect(isDecodeTimeout(broken)).toBe(false);
    const r = await detectFingerprint(garbled, new Uint8Array(32), { maxPixels: MAX_PIXELS });
    expect([r.present, r.blocks, r.scheme]).toEqual([false, 0, 0]);
    // Neither is a verdict (test/fingerprint-unexamined.test.ts: each says why in a warning).
  });
});

describe('fingerprint secret', () => {
  it('is created with mode 0600 on first use and reused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'optmark-fp-'));
    const a = await loadFingerprintSecret({ dataDir: dir });
    expect(a.length).toBe(32);
    expect(statSync(join(dir, 'fingerprint.key')).mode & 0o777).toBe(0o600);
    const b = await loadFingerprintSecret({ dataDir: dir });
    expect(Buffer.from(b).equals(Buffer.from(a))).toBe(true);
  });

  it('created by every worker at once on a fresh data directory: one secret, whole, for all', async () => {
    // Each worker thread loads the secret at warm-up, all at the same instant. The file used to be created
    // empty and then written: a worker reading it in between failed ("too short": in 20 of 200 threads here),
    // and until it loaded again its verify reported the fingerprint absent.
    requireBuild();
    const module = pathToFileURL(join(ROOT, 'dist', 'src', 'fingerprint', 'secret.js')).href;
    const script = `import { parentPort, workerData } from 'node:worker_threads';
      const { loadFingerprintSecret } = await import(workerData.module);
      const go = new Int32Array(workerData.go);
      const out = [];
      for (const [round, dir] of workerData.dirs.entries()) {
        Atomics.add(go, round, 1);
        while (Atomics.load(go, round) < workerData.threads) {}
        const loads = await Promise.allSettled([0, 1, 2].map(() => loadFingerprintSecret({ dataDir: dir })));
        out.push(loads.map((r) => (r.status === 'fulfilled' ? Buffer.from(r.value).toString('hex') : 'failed: ' + r.reason.message)));
      }
      parentPort.postMessage(out);`;
    const url = new URL(`data:text/javascript,${encodeURIComponent(script)}`);
    const threads = 4;
    const dirs = Array.from({ length: 50 }, () => mkdtempSync(join(tmpdir(), 'optmark-fp-')));
    const go = new SharedArrayBuffer(4 * dirs.length);
    const answers = await Promise.all(
      Array.from({ length: threads }, () => {
        const w = new Worker(url, { workerData: { module, dirs, go, threads } });
        return new Promise<string[][]>((res, rej) => w.once('message', res).once('error', rej));
      }),
    );
    dirs.forEach((dir, round) => {
      const loaded = answers.flatMap((a) => a[round]!);
      expect(loaded.filter((a) => a.startsWith('failed'))).toEqual([]);
      expect(new Set(loaded).size).toBe(1);
      expect(readFileSync(join(dir, 'fingerprint.key')).toString('hex')).toBe(loaded[0]);
      // No file of a loser is left behind.
      expect(readdirSync(dir)).toEqual(['fingerprint.key']);
    });
  });

  it('reads a configured file and refuses a missing one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'optmark-fp-'));
    const made = await loadFingerprintSecret({ dataDir: dir });
    const again = await loadFingerprintSecret({ dataDir: '/nonexistent', file: join(dir, 'fingerprint.key') });
    expect(Buffer.from(again).equals(Buffer.from(made))).toBe(true);
    await expect(loadFingerprintSecret({ dataDir: dir, file: join(dir, 'missing.key') })).rejects.toThrow(/does not exist/);
  });
});

describe('fingerprint statistics', () => {
  it('binomial tail matches known values', () => {
    expect(binomialTail(10, 10)).toBeCloseTo(1 / 1024, 12);
    expect(binomialTail(10, 0)).toBe(1);
    expect(binomialTail(64, 51)).toBeLessThan(1e-6);
    expect(binomialTail(64, 50)).toBeGreaterThan(1e-6);
  });
  it('sign-flip bound is monotone and below 1e-6 past t = 5.2', () => {
    expect(signFlipTail(0)).toBe(1);
    expect(signFlipTail(5.2)).toBeLessThan(5e-7);
    expect(signFlipTail(4)).toBeGreaterThan(signFlipTail(5));
  });
});

describe.skipIf(!existsSync(NATURAL))('fingerprint on ../shared/natural', () => {
  it('keeps PSNR >= 40 dB and detects after JPEG 50 on every image', async () => {
    const files = readdirSync(NATURAL)
      .filter((f) => f.endsWith('.png'))
      .sort()
      .slice(0, 6);
    for (const f of files) {
      const orig = readFileSync(join(NATURAL, f));
      const marked = Buffer.from(await embedFingerprint(orig, SECRET, { maxPixels: MAX_PIXELS }));
      expect(await psnr(orig, marked), f).toBeGreaterThanOrEqual(40);
      const d = await detectFingerprint(await attacks.jpeg50!(marked), SECRET, { maxPixels: MAX_PIXELS });
      expect(d.present, `${f} z=${d.z}`).toBe(true);
    }
  });
});
if (!existsSync(NATURAL)) console.log(`fingerprint: ${NATURAL} is missing; the Kodak checks are skipped.`);
