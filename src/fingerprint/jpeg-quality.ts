/**
 * Estimates the IJG quality a JPEG was saved at from its luminance quantisation table, so that the
 * re-encode after embedding neither bloats a q75 file nor degrades a q95 one. Bounded scan of the
 * header segments only (SOI, then length-prefixed segments up to SOS).
 */

const MARKER_SOI = 0xd8; // ff d8
const MARKER_SOS = 0xda; // ff da
const MARKER_DQT = 0xdb; // ff db
/** Header segments scanned before giving up. */
const MAX_SEGMENTS = 256;

// ITU T.81 Annex K.1, natural (row-major) order; DQT stores zigzag order, which does not matter for a mean ratio.
const STD_LUMA = [
  16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103,
  77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const STD_SUM = STD_LUMA.reduce((a, b) => a + b, 0);

/** IJG quality (1-100) of the first luminance table, or undefined when there is none or the header is odd. */
export function estimateJpegQuality(bytes: Uint8Array): number | undefined {
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== MARKER_SOI) return undefined;
  let pos = 2;
  for (let seg = 0; seg < MAX_SEGMENTS && pos + 4 <= bytes.length; seg++) {
    if (bytes[pos] !== 0xff) return undefined;
    const marker = bytes[pos + 1]!;
    if (marker === 0xff) {
      pos += 1; // fill byte
      continue;
    }
    if (marker === MARKER_SOS) return undefined;
    const len = (bytes[pos + 2]! << 8) | bytes[pos + 3]!;
    if (len < 2 || pos + 2 + len > bytes.length) return undefined;
    if (marker === MARKER_DQT) {
      const q = lumaQuality(bytes.subarray(pos + 4, pos + 2 + len));
      if (q !== undefined) return q;
    }
    pos += 2 + len; // always advances: len >= 2
  }
  return undefined;
}

function lumaQuality(body: Uint8Array): number | undefined {
  let p = 0;
  while (p < body.length) {
    const pq = body[p]! >> 4;
    const id = body[p]! & 15;
    const size = pq ? 128 : 64;
    if (p + 1 + size > body.length) return undefined;
    if (id === 0) {
      let sum = 0;
      for (let i = 0; i < 64; i++) sum += pq ? (body[p + 1 + 2 * i]! << 8) | body[p + 2 + 2 * i]! : body[p + 1 + i]!;
      const scale = (sum * 100) / STD_SUM;
      const q = scale <= 100 ? (200 - scale) / 2 : 5000 / scale;
      return Math.max(1, Math.min(100, Math.round(q)));
    }
    p += 1 + size;
  }
  return undefined;
}
