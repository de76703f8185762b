/**
 * The one structure a container walk produces (src/formats/types.ts), checked for what its callers rely
 * on: a file-backed parse (`need`) reads nothing of the copy ranges but their first bytes, and marks the
 * file exactly as the in-memory parse does; the manifest store, quantisation tables and losslessness
 * agree with independent readings of the same files.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { parseImage, type ByteRange, type ParsedImage } from '../src/formats/index.js';
import { protect } from '../src/marking/engine.js';
import { FixtureSet } from './helpers/fixtures.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const fx = new FixtureSet();
afterAll(() => fx.close());

/**
 * Parses `file` as a file-backed caller does: a buffer of its length holding garbage where `need` was
 * not asked, and the list of ranges asked.
 */
function fileBacked(file: Buffer): { image: ParsedImage; asked: ByteRange[]; sparse: Buffer } {
  const sparse = Buffer.alloc(file.length, 0x5a);
  const asked: ByteRange[] = [];
  const image = parseImage(sparse, (start, end) => {
    expect(start).toBeGreaterThanOrEqual(0);
    expect(end).toBeLessThanOrEqual(file.length);
    asked.push({ start, end });
    file.copy(sparse, start, start, end);
  });
  return { image, asked, sparse };
}

/** The output a file-backed caller writes: pieces from memory, except those inside a copy range, which come from the file. */
function assembleFromFile(pieces: readonly Uint8Array[], sparse: Buffer, file: Buffer, copy: readonly ByteRange[]): Buffer {
  return Buffer.concat(
    pieces.map((p) => {
      const from = p.byteOffset - sparse.byteOffset;
      const inInput = p.buffer === sparse.buffer && from >= 0 && from + p.length <= sparse.length;
      if (!inInput) return p;
      const touchesCopy = copy.some((r) => from < r.end && from + p.length > r.start);
      return touchesCopy ? file.subarray(from, from + p.length) : p;
    }),
  );
}

const inRanges = (at: number, ranges: readonly ByteRange[]): boolean => ranges.some((r) => at >= r.start && at < r.end);

const corpusFiles = existsSync(CORPUS) ? readdirSync(CORPUS).filter((f) => /\.(jpe?g|png|webp)$/i.test(f)) : [];

async function samples(): Promise<Array<[string, Buffer]>> {
  const out: Array<[string, Buffer]> = [];
  for (const name of ['base.jpg', 'base.png', 'base.webp', 'lossless.webp', 'animated.webp']) out.push([name, await fx.bytes(name)]);
  for (const name of corpusFiles) out.push([name, readFileSync(join(CORPUS, name))]);
  return out;
}

describe('a file-backed parse', () => {
  it('marks every readable file exactly as the in-memory parse does, reading only the first bytes of its copy ranges', async () => {
    let checked = 0;
    for (const [name, file] of await samples()) {
      let memory: ReturnType<typeof protect>;
      try {
        memory = protect(file);
      } catch {
        continue; // refused files are refused the same way (below)
      }
      const { image, asked, sparse } = fileBacked(file);
      expect(image.copyRanges, name).toEqual(memory.image.copyRanges);
      const marked = protect(image);
      expect(marked.warnings, name).toEqual(memory.warnings);
      expect(assembleFromFile(marked.pieces, sparse, file, image.copyRanges).equals(Buffer.from(memory.bytes)), name).toBe(true);
      // Of a copy range, each read takes only its first bytes (a chunk header and a bitstream's header, a
      // JPEG's end marker and the last 64 bytes where trailers end) when the file is whole: the
      // bitstreams themselves are never read. (A JPEG with bytes after its end marker is searched for it.)
      const endsWithEoi = image.format.name !== 'jpeg' || file.readUInt16BE(file.length - 2) === 0xffd9;
      if (memory.warnings.length === 0 && endsWithEoi) {
        for (const r of asked) {
          let inCopy = 0;
          for (let at = r.start; at < r.end; at++) if (inRanges(at, image.copyRanges)) inCopy++;
          expect(inCopy, `${name}: read [${r.start}, ${r.end})`).toBeLessThanOrEqual(64);
        }
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });

  it('refuses what the in-memory parse refuses, with the same code', () => {
    for (const name of corpusFiles) {
      const file = readFileSync(join(CORPUS, name));
      const code = (f: () => unknown): string | undefined => {
        try {
          f();
          return undefined;
        } catch (err) {
          return (err as { code?: string }).code;
        }
      };
      expect(
        code(() => fileBacked(file).image.xmp),
        name,
      ).toBe(code(() => parseImage(file).xmp));
    }
  });
});

describe('what the structure answers', () => {
  it.skipIf(corpusFiles.length === 0)('Content Credentials: the C2PA files of the corpus carry a store, the rest none; its ranges are APP11 segments', () => {
    for (const name of corpusFiles) {
      const file = readFileSync(join(CORPUS, name));
      let image: ParsedImage;
      try {
        image = parseImage(file);
      } catch {
        continue;
      }
      expect(image.manifestStore !== undefined, name).toBe(name.startsWith('c2pa_'));
      expect(hasManifestStore(image.format.name, file)).toBe(image.manifestStore !== undefined);
      for (const r of image.manifestStore?.ranges ?? []) {
        expect(file[r.start]).toBe(0xff);
        expect(file[r.start + 1]).toBe(0xeb);
        expect(file.readUInt16BE(r.start + 2) + 2).toBe(r.end - r.start);
      }
    }
  });

  it('quantisation tables: a JPEG saved at quality 50 has the standard luminance table, stored in zigzag order', async () => {
    const sharp = (await import('sharp')).default;
    const q50 = await sharp({ create: { width: 16, height: 16, channels: 3, background: '#808080' } })
      .jpeg({ quality: 50, optimiseCoding: false })
      .toBuffer();
    const tables = parseImage(q50).quantTables;
    const luma = tables.find((t) => t.id === 0)!;
    expect(luma.precision).toBe(8);
    // ITU T.81 Annex K.1 in zigzag order: the first values 16, 11, 12, 14, 12, 10.
    expect(luma.values.slice(0, 6)).toEqual([16, 11, 12, 14, 12, 10]);
    expect(tables.map((t) => t.id)).toContain(1);
    expect(parseImage(await fx.bytes('base.png')).quantTables).toEqual([]);
  });

  it('losslessness: PNG and VP8L WebP yes, VP8 WebP and JPEG no', async () => {
    expect(parseImage(await fx.bytes('lossless.webp')).lossless).toBe(true);
    expect(parseImage(await fx.bytes('base.webp')).lossless).toBe(false);
    expect(parseImage(await fx.bytes('base.png')).lossless).toBe(true);
    expect(parseImage(await fx.bytes('base.jpg')).lossless).toBe(false);
  });
});
