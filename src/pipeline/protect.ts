/** The protect pipeline: the opt-out field in, the JSON answer with the produced bytes out. */
import { protect } from '../marking/engine.js';
import { protectBody } from './body.js';

/**
 * Protects `image` and returns the answer's body (UTF-8 JSON). It is written into `into` when it fits
 * there (the returned array is then a view of `into`'s memory), otherwise into an array of its own.
 */
export function runProtect(image: Uint8Array, basename: string, into?: Uint8Array): Uint8Array {
  const result = protect(image);
  return protectBody(result.pieces, { mimeType: result.mimeType, filename: `${basename}.${result.extension}`, signals: result.signals }, into);
}
