/**
 * Interoperability with ExifTool as the oracle, both ways: ExifTool reads what protect writes (every
 * fixture, every prohibiting token, all three formats, ExifTool's validator silent about our XMP), and
 * read() understands what ExifTool writes (`-XMP-plus:DataMining#=<token>` for every token, into plain
 * files and into files that already carry XMP, including ones protect made).
 */
import { readFile } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { protect, read } from '../src/marking/engine.js';
import { DATA_MINING_TOKENS, type DataMiningToken } from '../src/xmp/index.js';
import { xmpPackets } from './helpers/containers.js';
import { EXT, FIXTURES, FORMATS, FixtureSet, vocab } from './helpers/fixtures.js';
import { exiftoolDataMining, exiftoolTags, exiftoolXmp } from './helpers/oracle.js';

const TOKENS = Object.keys(DATA_MINING_TOKENS) as DataMiningToken[];
const PROHIBITING = TOKENS.filter((t) => DATA_MINING_TOKENS[t]);

const fx = new FixtureSet();
const et = fx.exiftool;
afterAll(() => fx.close());

/** ExifTool writes the token the way DESIGN.md §3 says works: `#` (no print conversion), bare token. */
async function exiftoolWritesToken(bytes: Uint8Array, ext: string, token: DataMiningToken): Promise<Buffer> {
  const path = fx.write(`et.${ext}`, bytes);
  await et.write(path, {}, { writeArgs: [`-XMP-plus:DataMining#=${token}`, '-overwrite_original'] });
  return readFile(path);
}

describe('ExifTool reads what protect writes', () => {
  it.each([...FIXTURES.keys()])('%s', async (name) => {
    const out = protect(await fx.bytes(name)).bytes;
    expect(await exiftoolDataMining(et, fx.write(name, out))).toBe('DMI-PROHIBITED-AIMLTRAINING');
  });

  it.each(PROHIBITING)('every format carries %s as ExifTool reads it', async (token) => {
    for (const format of FORMATS) {
      const out = protect(await fx.bytes(`base.${EXT[format]}`), { token }).bytes;
      expect(await exiftoolDataMining(et, fx.write(`t.${EXT[format]}`, out))).toBe(token);
    }
  });

  it.each([
    'base.jpg',
    'metadata.jpg',
    'exiftool-extended.jpg',
    'base.png',
    'apng.png',
    'icc-exif.png',
    'base.webp',
    'lossless-alpha.webp',
    'animated.webp',
    'icc-exif.webp',
  ])('ExifTool -validate finds nothing wrong with the protected %s that it did not find in the original', async (name) => {
    const input = await fx.bytes(name);
    const validate = async (bytes: Uint8Array): Promise<string[]> => {
      const tags = (await et.readRaw(fx.write(name, bytes), { readArgs: ['-validate', '-warning', '-error', '-a'] })) as Record<string, unknown>;
      return Object.entries(tags)
        .filter(([k]) => /Warning|Error|Validate/.test(k))
        .flatMap(([, v]) => (Array.isArray(v) ? v : [v]).map(String));
    };
    const before = await validate(input);
    const after = await validate(protect(input).bytes);
    // "Validate" is a count summary; compare the messages themselves. libvips puts PNG XMP in zTXt,
    // which protect keeps byte for byte beside its iTXt (DESIGN §4: every other chunk as it is), so
    // ExifTool notes a second packet there; it reads ours, the later one (see marking.test.ts).
    const expected = name === 'icc-exif.png' ? ['Duplicate XMP at PNG-InternationalText-XMP'] : [];
    expect(after.filter((w) => !/^\d+ (Warning|Error)/.test(w) && !before.includes(w))).toEqual(expected);
  });
});

describe('read() understands what ExifTool writes', () => {
  describe.each(FORMATS)('%s', (format) => {
    it.each(TOKENS)('-XMP-plus:DataMining#=%s into a plain file, then protect', async (token) => {
      const written = await exiftoolWritesToken(await fx.bytes(`base.${EXT[format]}`), EXT[format], token);
      expect(read(written)).toMatchObject({ optedOut: DATA_MINING_TOKENS[token], token, values: [vocab(token)] });
      const out = protect(written).bytes;
      expect(read(out)).toMatchObject({ optedOut: true, token: 'DMI-PROHIBITED-AIMLTRAINING', values: [vocab('DMI-PROHIBITED-AIMLTRAINING')] });
      expect(await exiftoolDataMining(et, fx.write(`p.${EXT[format]}`, out))).toBe('DMI-PROHIBITED-AIMLTRAINING');
      // ExifTool's default write with the default token is already what protect writes.
      if (token === 'DMI-PROHIBITED-AIMLTRAINING') expect(protect(written).changed).toBe(false);
    });

    it('ExifTool edits a protected file (allows again, adds a title): read follows, protect restores and keeps the title', async () => {
      const source = format === 'jpeg' ? 'metadata.jpg' : format === 'png' ? 'exiftool-xmp.png' : 'exiftool-xmp.webp';
      const protectedOnce = protect(await fx.bytes(source)).bytes;
      const path = fx.write(`edit.${EXT[format]}`, protectedOnce);
      await et.write(path, {}, { writeArgs: ['-XMP-plus:DataMining#=DMI-ALLOWED', '-XMP-dc:Title=Edited by ExifTool', '-overwrite_original'] });
      const edited = await readFile(path);
      expect(read(edited)).toMatchObject({ optedOut: false, token: 'DMI-ALLOWED' });
      const again = protect(edited).bytes;
      expect(xmpPackets(format, again)).toHaveLength(1);
      const tags = await exiftoolXmp(et, fx.write(`again.${EXT[format]}`, again));
      expect(tags['XMP-dc:Title']).toBe('Edited by ExifTool');
      expect(await exiftoolDataMining(et, fx.write(`again.${EXT[format]}`, again))).toBe('DMI-PROHIBITED-AIMLTRAINING');
    });
  });

  it('ExifTool-written Extended XMP is read and merged; ExifTool reads every property back after protect', async () => {
    const input = await fx.bytes('exiftool-extended.jpg');
    const before = await exiftoolTags(et, fx.write('x.jpg', input), ['-XMP:all']);
    expect(before['XMP-xmpNote:HasExtendedXMP']).toMatch(/^[0-9A-F]{32}$/);
    const out = protect(input).bytes;
    const after = await exiftoolTags(et, fx.write('x.jpg', out), ['-XMP:all']);
    expect(after['XMP-plus:DataMining']).toBe('DMI-PROHIBITED-AIMLTRAINING');
    expect(after['XMP-dc:Description']).toBe(before['XMP-dc:Description']);
    expect(after['XMP-dc:Title']).toBe(before['XMP-dc:Title']);
    expect(after['XMP-xmpNote:HasExtendedXMP']).toMatch(/^[0-9A-F]{32}$/);
  });
});
