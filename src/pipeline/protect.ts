/** The protect pipeline: the opt-out field in, the JSON answer with the produced bytes out. */
import { protect } from '../marking/engine.js';
import { protectBody } from './body.js';

/**
 * Protects `image` and returns the answer's body (UTF-8 JSON). It is written into `into` when it fits
 * there (the returned array is then a view of `into`'s memory), otherwise into an array of its own.
 * `maxOutputBytes` is the server's upload limit: protect refuses (output_too_large) to answer with a
 * file the server would not accept back.
 */
export function runProtect(image: Uint8Array, basename: string, into?: Uint8Array, maxOutputBytes?: number): Uint8Array {
  const result = protect(image, maxOutputBytes === undefined ? {} : { maxOutputBytes });
  return protectBody(result.pieces, { mimeType: result.mimeType, filename: `${basename}.${result.extension}`, signals: result.signals, warnings: result.warnings }, into);
}
