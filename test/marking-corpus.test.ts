/**
 * Conformance over the real-world corpus in ../shared/corpus (beside the checkout), checked against the
 * outcomes its README lists. The corpus is not part of the project: when it is absent, one test says
 * so plainly and the suite passes on the generated fixtures alone.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { OptmarkError } from '../src/errors.js';
import { protect, read } from '../src/marking/engine.js';
import { sniff } from './helpers/containers.js';
import { FixtureSet } from './helpers/fixtures.js';
import { exiftoolDataMining, exiftoolXmp, expectMarkedStructure, pixels } from './helpers/oracle.js';

/** OPTMARK_TEST_CORPUS points the suite elsewhere (or nowhere, to see the skip). */
const CORPUS = process.env.OPTMARK_TEST_CORPUS ?? fileURLToPath(new URL('../../shared/corpus', import.meta.url));
const present = existsSync(join(CORPUS, 'README.md'));
const files = present
  ? readdirSync(CORPUS)
      .filter((f) => !f.endsWith('.md') && !f.endsWith('.tsv'))
      .sort()
  : [];

/** The README's groups. */
const BOMBS = new Set(['sharp_giant-image.jpg', 'sharp_65536-uint32-limit.png']);
const DAMAGED = new Set([
  'pillow_truncated_jpeg.jpg',
  'sharp_truncated.jpg',
  'sharp_corrupt-header.jpg',
  'pillow_truncated_image.png',
  'pillow_broken.png',
  'pillow_broken_data_stream.png',
  'danbooru_truncated.webp',
]);
/** The one original already opted out (DMI-PROHIBITED-GENAIMLTRAINING). */
const OPTED_OUT = new Set(['iptc-ref-2023.1_10x10_folio.jpg']);

/**
 * The file whose trailers address it by absolute offsets (AFCP, Samsung QDIO): protect moves those with
 * the image data (test/jpeg-trailers.test.ts); everything else after the scan stays byte for byte.
 */
const TRAILER_OFFSETS = new Set(['exiftool_ExifTool.jpg']);

/**
 * The output with its trailer offsets put back: every byte that differs in the tail (after the file's
 * growth, the same length in both) must lie in a 4-byte word that holds the input's value plus that
 * growth, in one byte order; those words are restored so the rest can be compared byte for byte.
 */
function unshiftTail(input: Buffer, output: Buffer): Buffer {
  const delta = output.length - input.length;
  const tail = 4096;
  const a = input.subarray(input.length - tail);
  const b = Buffer.from(output.subarray(output.length - tail));
  let moved = 0;
  for (let i = 0; i < tail; i++) {
    if (a[i] === b[i]) continue;
    const start = [0, 1, 2, 3]
      .map((k) => i - k)
      .find((s) => s >= 0 && s + 4 <= tail && (a.readUInt32BE(s) + delta === b.readUInt32BE(s) || a.readUInt32LE(s) + delta === b.readUInt32LE(s)));
    expect(start, `tail byte ${i} changed outside a moved offset`).toBeDefined();
    a.copy(b, start!, start!, start! + 4);
    moved++;
    i = start! + 3;
  }
  expect(moved).toBeGreaterThan(0);
  return Buffer.concat([output.subarray(0, output.length - tail), b]);
}

const fx = new FixtureSet();
const et = fx.exiftool;
afterAll(() => fx.close());

const bytesOf = (name: string): Buffer => readFileSync(join(CORPUS, name));

if (!present) {
  it('corpus conformance: SKIPPED, ../shared/corpus is not beside this checkout', () => {
    console.warn(`marking-corpus: SKIPPED: ${CORPUS} not found; only the generated fixtures were tested.`);
    expect(present).toBe(false);
  });
} else {
  it('the corpus holds every file the README names', () => {
    for (const name of [...BOMBS, ...DAMAGED, ...OPTED_OUT]) expect(files).toContain(name);
  });

  describe.each(files.filter((f) => !DAMAGED.has(f)))('valid: %s', (name) => {
    it(`read: optedOut ${OPTED_OUT.has(name)}, as ExifTool reads it too`, async () => {
      const input = bytesOf(name);
      expect(read(input).optedOut).toBe(OPTED_OUT.has(name));
      const theirs = await exiftoolDataMining(et, join(CORPUS, name));
      expect(read(input).optedOut).toBe(typeof theirs === 'string' && theirs.startsWith('DMI-PROHIBITED'));
    });

    it('protect: same format, non-XMP parts byte-equal, ExifTool reads the value, idempotent', async () => {
      const input = bytesOf(name);
      const format = sniff(input)!;
      const p = protect(input);
      expect(p.format).toBe(format);
      expectMarkedStructure(format, input, TRAILER_OFFSETS.has(name) ? unshiftTail(input, Buffer.from(p.bytes)) : p.bytes);
      expect(read(p.bytes)).toMatchObject({ optedOut: true, token: 'DMI-PROHIBITED-AIMLTRAINING' });
      const path = fx.write(name, p.bytes);
      expect(await exiftoolDataMining(et, path)).toBe('DMI-PROHIBITED-AIMLTRAINING');
      expect(await exiftoolXmp(et, path)).toMatchObject(await exiftoolXmp(et, join(CORPUS, name)));
      expect(Buffer.from(protect(p.bytes).bytes).equals(Buffer.from(p.bytes))).toBe(true);
    });

    if (!BOMBS.has(name)) {
      it('protect: decoded pixels are identical', async () => {
        const input = bytesOf(name);
        expect((await pixels(protect(input).bytes)).equals(await pixels(input))).toBe(true);
      });
    }
  });

  describe.each([...DAMAGED])('damaged: %s', (name) => {
    it('protect: a correctly marked output, or damaged_image', async () => {
      const input = bytesOf(name);
      let result: ReturnType<typeof protect> | undefined;
      try {
        result = protect(input);
      } catch (e) {
        expect(e).toBeInstanceOf(OptmarkError);
        expect((e as OptmarkError).code).toBe('damaged_image');
        return;
      }
      const out = result.bytes;
      expect(sniff(out)).toBe(sniff(input));
      expect(read(out)).toMatchObject({ optedOut: true, token: 'DMI-PROHIBITED-AIMLTRAINING' });
      expect(await exiftoolDataMining(et, fx.write(name, out))).toBe('DMI-PROHIBITED-AIMLTRAINING');
      expect(Buffer.from(protect(out).bytes).equals(Buffer.from(out))).toBe(true);
    });

    it('read: the metadata where readable, otherwise damaged_image', () => {
      try {
        expect(read(bytesOf(name)).optedOut).toBe(false);
      } catch (e) {
        expect((e as OptmarkError).code).toBe('damaged_image');
      }
    });
  });
}
