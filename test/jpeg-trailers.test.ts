/**
 * Trailers that address the file by absolute offsets (issue #37 point 6): an AFCP trailer (IPTC after
 * the image, located by absolute file offsets) and a Samsung QDIO block (the audio's absolute start and
 * end). protect changes the size of what precedes the image data, so it moves those offsets with it, as
 * ExifTool does when it writes: ExifTool's validator finds no warning in the output that it did not find
 * in the input (it said "Adjusted AFCP offsets by 434" before), and reads the same IPTC from the trailer.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { protect } from '../src/marking/engine.js';
import { parseImage } from '../src/formats/index.js';
import { FixtureSet } from './helpers/fixtures.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const EXIFTOOL = join(import.meta.dirname, '..', 'node_modules', 'exiftool-vendored.pl', 'bin', 'exiftool');
const fx = new FixtureSet();
afterAll(() => fx.close());

/** ExifTool's own command line: `-validate -warning -a`, one message per line. */
function warnings(bytes: Uint8Array, name = 'w.jpg'): string[] {
  const path = fx.write(name, bytes);
  const out = execFileSync('perl', [EXIFTOOL, '-validate', '-warning', '-a', '-s3', path], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l && !/^\d+ (Warnings?|Errors?)|^OK$/.test(l));
}

function iptc(bytes: Uint8Array, name = 'i.jpg'): string {
  const path = fx.write(name, bytes);
  return execFileSync('perl', [EXIFTOOL, '-IPTC:all', '-a', '-G1', '-s', path], { encoding: 'utf8' });
}

/** An AFCP trailer holding one IPTC caption, for a file whose trailer starts at `at`; `stale` misstates the header's offset by that much. */
function afcpTrailer(at: number, caption: string, littleEndian: boolean, stale = 0): Buffer {
  const text = Buffer.from(caption, 'latin1');
  const record = Buffer.concat([Buffer.from([0x1c, 0x02, 0x78, text.length >> 8, text.length & 0xff]), text]);
  const hdr = Buffer.from(littleEndian ? 'AXS*' : 'AXS!', 'latin1');
  const u16 = (v: number): Buffer => {
    const b = Buffer.alloc(2);
    littleEndian ? b.writeUInt16LE(v) : b.writeUInt16BE(v);
    return b;
  };
  const u32 = (v: number): Buffer => {
    const b = Buffer.alloc(4);
    littleEndian ? b.writeUInt32LE(v) : b.writeUInt32BE(v);
    return b;
  };
  const dataAt = at + 12 + 12;
  return Buffer.concat([
    hdr,
    u16(1),
    u16(1),
    u32(0),
    Buffer.from('IPTC', 'latin1'),
    u32(record.length),
    u32(dataAt - stale),
    record,
    hdr,
    u32(at - stale),
    u32(0),
  ]);
}

let jpg: Buffer;
beforeAll(async () => {
  jpg = await fx.bytes('base.jpg');
});

describe('AFCP trailers', () => {
  it.each([false, true])('offsets move with the file (little-endian: %s): no new ExifTool warning, the same IPTC', (le) => {
    const input = Buffer.concat([jpg, afcpTrailer(jpg.length, 'optmark AFCP test', le)]);
    expect(warnings(input).join('\n')).not.toMatch(/Adjusted AFCP/);
    const out = Buffer.from(protect(input).bytes);
    expect(out.length).not.toBe(input.length); // the XMP segment moves the trailer
    expect(warnings(out).filter((w) => !warnings(input).includes(w))).toEqual([]);
    expect(iptc(out)).toContain('optmark AFCP test');
    expect(iptc(out)).toBe(iptc(input));
    // Marked again: the same file.
    expect(Buffer.from(protect(out).bytes).equals(out)).toBe(true);
  });

  it('offsets already stale in the input stay stale by the same amount (the same warning, no other)', () => {
    const input = Buffer.concat([jpg, afcpTrailer(jpg.length, 'stale', false, 434)]);
    expect(warnings(input)).toContain('[minor] Adjusted AFCP offsets by 434');
    const out = Buffer.from(protect(input).bytes);
    expect(warnings(out).filter((w) => !warnings(input).includes(w))).toEqual([]);
    expect(iptc(out)).toBe(iptc(input));
  });

  it("the offsets are not copy ranges: a file-backed caller takes them from the structure's rewrite", () => {
    const input = Buffer.concat([jpg, afcpTrailer(jpg.length, 'ranges', false)]);
    const { copyRanges } = parseImage(input);
    const entry = jpg.length + 12 + 8;
    const footer = input.length - 8;
    for (const at of [entry, footer]) expect(copyRanges.some((r) => at < r.end && at + 4 > r.start)).toBe(false);
  });

  it.skipIf(!existsSync(join(CORPUS, 'exiftool_ExifTool.jpg')))(
    "ExifTool's own test image (AFCP behind FotoStation, Canon VRD, PhotoMechanic, MIE, Samsung and Vivo trailers): no new warning, the audio offsets still point at the audio",
    () => {
      const input = readFileSync(join(CORPUS, 'exiftool_ExifTool.jpg'));
      const out = Buffer.from(protect(input).bytes);
      expect(out.length).not.toBe(input.length);
      expect(warnings(out).filter((w) => !warnings(input).includes(w))).toEqual([]);
      expect(iptc(out)).toBe(iptc(input));
      // Samsung QDIO block: absolute start and end of the embedded audio, before its closing length and type.
      const qdioEnd = (b: Buffer): number => b.lastIndexOf(Buffer.from('QDIO', 'latin1'));
      const audio = (b: Buffer): string => {
        const at = qdioEnd(b) - 4 - 20 + 12;
        return b.toString('latin1', b.readUInt32LE(at), b.readUInt32LE(at + 4));
      };
      expect(audio(input)).toBe('<dummy wav file>');
      expect(audio(out)).toBe('<dummy wav file>');
    },
  );
});
