/**
 * "Strip metadata" as a republishing site does it, without touching the image data: a JPEG's APP1..APP15
 * segments (EXIF, XMP, ICC, IPTC, ...) and comments dropped, every other segment and the entropy-coded data
 * kept byte for byte. For the recognition benchmark and tests, beside the attacks of ./fingerprint-attacks.ts.
 * JPEG layout: ITU-T T.81 B.1 (SOI, then marker segments FF xx + 2-byte length, then SOS and the scan).
 */
const SOI = 0xd8; // ff d8
const SOS = 0xda; // ff da: the scan follows; copied as it is
const APP1 = 0xe1; // ff e1 .. ff ef: application segments
const APP15 = 0xef;
const COM = 0xfe; // ff fe

export function stripJpegMetadata(bytes: Uint8Array): Buffer {
  if (bytes[0] !== 0xff || bytes[1] !== SOI) throw new Error('stripJpegMetadata: not a JPEG');
  const kept: Uint8Array[] = [bytes.subarray(0, 2)];
  let p = 2;
  while (p + 4 <= bytes.length) {
    if (bytes[p] !== 0xff) throw new Error(`stripJpegMetadata: no marker at ${p}`);
    const marker = bytes[p + 1]!;
    if (marker === SOS) break;
    const end = p + 2 + ((bytes[p + 2]! << 8) | bytes[p + 3]!);
    if (end <= p + 2 || end > bytes.length) throw new Error(`stripJpegMetadata: bad segment length at ${p}`);
    if (!((marker >= APP1 && marker <= APP15) || marker === COM)) kept.push(bytes.subarray(p, end));
    p = end;
  }
  kept.push(bytes.subarray(p));
  return Buffer.concat(kept);
}
