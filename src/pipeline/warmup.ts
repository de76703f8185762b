/**
 * Warms a worker before the server reports ready: the first requests should not pay for module
 * initialisation and JIT compilation of the hot paths (container edits, XMP, hashing, base64).
 */
import sharp from 'sharp';
import { protect, read } from '../marking/engine.js';
import { protectBody, sha256Hex } from './body.js';
import { warmUpUpload } from './upload.js';

const ROUNDS = 40;

/** Small JPEG, PNG and WebP files. */
export function samples(): Promise<Buffer[]> {
  const base = sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 120, g: 80, b: 40 } } });
  return Promise.all([base.clone().jpeg().toBuffer(), base.clone().png().toBuffer(), base.clone().webp().toBuffer()]);
}

export async function warmUp(): Promise<void> {
  await warmUpUpload();
  const files = await samples();
  const big = Buffer.alloc(1 << 20, 7);
  for (let i = 0; i < ROUNDS; i++) {
    for (const s of files) {
      const p = protect(s);
      read(p.bytes);
      protect(p.bytes);
      protectBody(p.pieces, { mimeType: p.mimeType, filename: `w.${p.extension}`, signals: p.signals });
    }
    if (i % 8 === 0) {
      sha256Hex(big);
      protectBody(big, { mimeType: 'image/jpeg', filename: 'w.jpg', signals: [] });
    }
  }
}
