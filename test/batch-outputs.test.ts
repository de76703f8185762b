/**
 * Batch marking's outputs (src/batch/work.ts, files.ts, image-file.ts): byte for byte what protect()
 * makes of the whole file, for every file of the corpus, JPEGs whose metadata runs past 64 KiB, cut files
 * and trailers, at one lane and at several; and the read buffer refuses a file that changed after it was
 * opened.
 */
import { closeSync, existsSync, readdirSync, readFileSync, truncateSync, writeFileSync, appendFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileError, openSource, ReadBuffer } from '../src/batch/files.js';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { INVALIDATED_WARNING } from '../src/c2pa/update.js';
import { protect } from '../src/marking/engine.js';
import { runBinary, TempDirs } from './helpers/files.js';

const CORPUS = process.env.OPTMARK_TEST_CORPUS ?? fileURLToPath(new URL('../../shared/corpus', import.meta.url));
const temp = new TempDirs('optmark-copy-');
const tempDir = (prefix?: string): string => temp.make(prefix);

/** protect()'s output for the whole file, or undefined when it refuses the file. */
function expected(bytes: Buffer): Buffer | undefined {
  try {
    return Buffer.from(protect(bytes).bytes);
  } catch {
    return undefined;
  }
}

/** A JPEG of `segments` COM segments of 60,000 bytes each before its frame: its metadata passes 64 KiB. */
function withLongMetadata(jpeg: Buffer, segments: number): Buffer {
  const parts: Buffer[] = [jpeg.subarray(0, 2)];
  for (let i = 0; i < segments; i++) {
    const seg = Buffer.alloc(4 + 59_998, 0x41 + i);
    seg[0] = 0xff;
    seg[1] = 0xfe;
    seg.writeUInt16BE(60_000, 2);
    parts.push(seg);
  }
  parts.push(jpeg.subarray(2));
  return Buffer.concat(parts);
}

let big: Buffer;
/** WebPs whose bitstream is longer than what is copied file to file: lossy (VP8), lossless (VP8L), extended with EXIF. */
let webps: Record<string, Buffer>;

beforeAll(async () => {
  big = await sharp({ create: { width: 1200, height: 900, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 40 } } })
    .jpeg({ quality: 95 })
    .toBuffer();
  const noise = sharp({ create: { width: 600, height: 400, channels: 4, noise: { type: 'gaussian', mean: 110, sigma: 40 } } });
  const lossy = await sharp(big).webp({ quality: 90 }).toBuffer();
  const exif = await sharp(big)
    .webp({ quality: 90 })
    .withExif({ IFD0: { Copyright: 'webp test' } })
    .toBuffer();
  webps = { lossy, lossless: await noise.clone().webp({ lossless: true }).toBuffer(), exif, alpha: await noise.clone().webp({ quality: 90 }).toBuffer() };
  // already carrying the field (copied as it is), carrying XMP to rewrite, cut off (RIFF size past the end), bytes after the RIFF payload
  webps.marked = Buffer.from(protect(exif).bytes);
  webps.remarked = Buffer.from(protect(exif, { token: 'DMI-PROHIBITED' }).bytes);
  webps.cut = lossy.subarray(0, lossy.length - 3000);
  webps.trailer = Buffer.concat([lossy, Buffer.alloc(70_000, 5)]);
});

afterAll(() => temp.removeAll());

describe('batch marking outputs', () => {
  it('every corpus file, and JPEGs whose metadata runs past the first 64 KiB: each output is what protect() makes of the whole file', async () => {
    const input = tempDir('optmark-in-');
    const names = existsSync(CORPUS) ? readdirSync(CORPUS).filter((n) => /\.(jpe?g|png|webp)$/i.test(n)) : [];
    expect(names.length, `${CORPUS} holds the corpus`).toBeGreaterThan(20);
    for (const n of names) writeFileSync(join(input, n), readFileSync(join(CORPUS, n)));
    writeFileSync(join(input, 'big.jpg'), big);
    writeFileSync(join(input, 'long-metadata.jpg'), withLongMetadata(big, 2)); // SOS past 64 KiB
    writeFileSync(join(input, 'empty.jpg'), Buffer.alloc(0)); // not an image: skipped
    const marked = protect(big).bytes;
    writeFileSync(join(input, 'already.jpg'), marked); // carries the field exactly: written as it is
    writeFileSync(join(input, 'cut.jpg'), big.subarray(0, big.length - 5000)); // cut off: warned
    writeFileSync(join(input, 'trailer.jpg'), Buffer.concat([big, Buffer.alloc(70_000, 9)])); // EOI not in its last bytes
    for (const [n, b] of Object.entries(webps)) {
      expect(b.length, n).toBeGreaterThan(70_000);
      writeFileSync(join(input, `${n}.webp`), b);
    }
    for (const [jobs, withReport] of [
      ['1', true],
      ['8', true],
      ['1', false],
      ['8', false],
    ] as const) {
      const out = tempDir();
      const report = join(tempDir(), 'r.jsonl');
      // invalidate: files with Content Credentials get protect()'s bytes too (update adds a manifest: test/batch-c2pa.test.ts).
      const env = { OPTMARK_DATA_DIR: tempDir('optmark-data-'), OPTMARK_C2PA: 'invalidate' };
      const r = await runBinary(['mark', input, '--out', out, '--jobs', jobs, ...(withReport ? ['--report', report] : [])], { env });
      expect([0, 1], r.stderr).toContain(r.status);
      const lines = new Map(
        (withReport ? readFileSync(report, 'utf8') : '')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, any>)
          .map((l) => [basename(l.input), l]),
      );
      let compared = 0;
      for (const n of readdirSync(input)) {
        const bytes = readFileSync(join(input, n));
        const want = expected(bytes);
        const path = join(out, n);
        if (want === undefined) {
          expect(existsSync(path), `${n}: refused, so not written`).toBe(false);
          continue;
        }
        expect(readFileSync(path).equals(want), `${n} (--jobs ${jobs}, report ${withReport})`).toBe(true);
        compared++;
        if (!withReport) continue;
        // The report's warnings are protect's (a cut file), plus what became of Content Credentials.
        const line = lines.get(n)!;
        const store = hasManifestStore(protect(bytes).format, bytes);
        expect(line.credentials, n).toBe(store ? 'invalidated' : 'none');
        expect(line.warnings, n).toEqual([...protect(bytes).warnings, ...(store ? [INVALIDATED_WARNING] : [])]);
      }
      if (withReport) expect(lines.get('cut.jpg')!.warnings.map((w: { code: string }) => w.code)).toEqual(['truncated_image_data']);
      expect(compared).toBeGreaterThan(20);
      expect(readdirSync(out).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    }
  });

  it('a file read whole or in pieces that grew or shrank after it was opened is refused (changed_while_read)', () => {
    const codeOf = (f: () => unknown): string | undefined => {
      try {
        f();
        return undefined;
      } catch (err) {
        return err instanceof FileError ? err.code : String(err);
      }
    };
    for (const change of ['none', 'grow', 'shrink'] as const) {
      const dir = tempDir();
      const src = join(dir, 'in.webp');
      writeFileSync(src, big);
      const source = openSource(src, 1 << 30);
      try {
        if (change === 'grow') appendFileSync(src, Buffer.alloc(1, 7));
        else if (change === 'shrink') truncateSync(src, big.length - 1);
        const buffer = new ReadBuffer();
        const size = source.stats.size;
        const want = change === 'none' ? undefined : 'changed_while_read';
        expect(
          codeOf(() => buffer.readAll(source)),
          change,
        ).toBe(change === 'grow' ? want : undefined);
        // In pieces (verify's read of the metadata alone): the pieces, then the end.
        buffer.reserve(size);
        expect(
          codeOf(() => buffer.readAt(source.fd, size - 1000, size)),
          change,
        ).toBe(change === 'shrink' ? want : undefined);
        expect(
          codeOf(() => buffer.checkEnd(source)),
          change,
        ).toBe(change === 'grow' ? want : undefined);
        if (change === 'none')
          expect(
            buffer
              .view(size)
              .subarray(size - 1000)
              .equals(big.subarray(size - 1000)),
          ).toBe(true);
      } finally {
        closeSync(source.fd);
      }
    }
  });
});
