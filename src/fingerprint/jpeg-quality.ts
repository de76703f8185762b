/**
 * Estimates the IJG quality a JPEG was saved at from its luminance quantisation table, so that the
 * re-encode after embedding neither bloats a q75 file nor degrades a q95 one. The tables come from the
 * container's one walk (src/formats: the DQT segments before the first scan).
 */
import { jpeg } from '../formats/jpeg.js';

// ITU T.81 Annex K.1, natural (row-major) order; DQT stores zigzag order, which does not matter for a mean ratio.
const STD_LUMA = [
  16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103,
  77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
const STD_SUM = STD_LUMA.reduce((a, b) => a + b, 0);

/** IJG quality (1-100) of the first luminance table, or undefined when there is none or the file is not a readable JPEG. */
export function estimateJpegQuality(bytes: Uint8Array): number | undefined {
  let tables;
  try {
    tables = jpeg.sniff(bytes) ? jpeg.parse(bytes).quantTables : [];
  } catch {
    return undefined;
  }
  const luma = tables.find((t) => t.id === 0);
  if (!luma) return undefined;
  const sum = luma.values.reduce((a, b) => a + b, 0);
  const scale = (sum * 100) / STD_SUM;
  const q = scale <= 100 ? (200 - scale) / 2 : 5000 / scale;
  return Math.max(1, Math.min(100, Math.round(q)));
}
