/**
 * An RSL 1.0 licence in XMP (issue #40 point 2): the element form rslstandard.org's file-embedding guide
 * shows, written into JPEG, PNG and WebP by ExifTool (`-xmp<=packet`), read by verify into
 * `otherSignals` as `rsl.prohibitsTraining`; `optedOut` stays the IPTC field's. Permitting licences and
 * other usage types reserve nothing.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { protect } from '../src/marking/engine.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { type Format, smallImage } from './helpers/images.js';

const EXIFTOOL = join(import.meta.dirname, '..', 'node_modules', 'exiftool-vendored.pl', 'bin', 'exiftool');
const dir = mkdtempSync(join(tmpdir(), 'optmark-rsl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An XMP packet with the RSL licence as the guide embeds it (`prefix` binds the namespace). */
const rslPacket = (license: string, prefix = 'rsl'): string =>
  `<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="RSL/1.0">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:${prefix}="https://rslstandard.org/rsl">
  <rdf:Description rdf:about="">
   <${prefix}:rsl>
    <${prefix}:content url="https://images.example.com/photo.jpg">
     <${prefix}:license>${license.replaceAll('rsl:', `${prefix}:`)}</${prefix}:license>
    </${prefix}:content>
   </${prefix}:rsl>
  </rdf:Description>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="w"?>`;

const EXT: Record<Format, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };
let n = 0;

/** `format`'s small image with `packet` written as its XMP by ExifTool. */
async function withRsl(format: Format, packet: string): Promise<Buffer> {
  const file = join(dir, `img${n}.${EXT[format]}`);
  const xmp = join(dir, `packet${n++}.xmp`);
  writeFileSync(file, await smallImage(format));
  writeFileSync(xmp, packet);
  execFileSync(EXIFTOOL, ['-q', '-overwrite_original', `-xmp<=${xmp}`, file]);
  return readFileSync(file);
}

describe('verify: an RSL licence in XMP', () => {
  for (const format of ['jpeg', 'png', 'webp'] as const) {
    it(`${format}: prohibits ai-train is rsl.prohibitsTraining, optedOut stays false`, async () => {
      const bytes = await withRsl(format, rslPacket('<rsl:prohibits type="usage">ai-train</rsl:prohibits>'));
      expect(bytes.includes(Buffer.from('rslstandard.org/rsl'))).toBe(true);
      const r = await verifyReport(bytes, noLayers);
      expect(r.otherSignals).toEqual(['rsl.prohibitsTraining']);
      expect(r.optedOut).toBe(false);
      expect(r.signals).toEqual([]);
    });
  }

  it.each([
    ['prohibits ai-all, another prefix', '<rsl:prohibits type="usage">search, ai-all</rsl:prohibits>', 'lic', ['rsl.prohibitsTraining']],
    ['prohibits all', '<rsl:prohibits type="usage">all</rsl:prohibits>', 'rsl', ['rsl.prohibitsTraining']],
    ['permits search only (training not granted)', '<rsl:permits type="usage">search,ai-index</rsl:permits>', 'rsl', ['rsl.prohibitsTraining']],
    ['permits ai-train', '<rsl:permits type="usage">ai-train</rsl:permits>', 'rsl', []],
    ['permits all, free of charge', '<rsl:permits type="usage">all</rsl:permits><rsl:payment type="free"/>', 'rsl', []],
    ['prohibits for a geography, not a usage', '<rsl:prohibits type="geo">us</rsl:prohibits>', 'rsl', []],
    ['prohibits ai-input only', '<rsl:prohibits type="usage">ai-input</rsl:prohibits>', 'rsl', []],
  ])('%s', async (_name, license, prefix, expected) => {
    const r = await verifyReport(await withRsl('jpeg', rslPacket(license, prefix)), noLayers);
    expect(r.otherSignals).toEqual(expected);
  });

  it('marking a file that carries the licence keeps it: both the IPTC field and the RSL signal read back', async () => {
    const marked = protect(await withRsl('png', rslPacket('<rsl:prohibits type="usage">ai-train</rsl:prohibits>'))).bytes;
    const r = await verifyReport(marked, noLayers);
    expect(r.optedOut).toBe(true);
    expect(r.signals).toEqual(['iptc.dataMining']);
    expect(r.otherSignals).toEqual(['rsl.prohibitsTraining']);
  });
});
