/** The protect pipeline: opt-out field in, JSON body with the produced bytes out. */
import { protect } from '../marking/engine.js';
import { protectBody } from './body.js';
import type { ArenaBodyResult, BodyResult } from './tasks.js';

/**
 * Protects `input` and builds the response body, into `target` when it fits there (an arena range the
 * event-loop thread reserved), else into a buffer of its own. `maxOutputBytes` is the server's upload
 * limit: protect refuses (output_too_large) to answer with a file the server would not accept back.
 */
export function runProtect(input: Uint8Array, basename: string, target?: Uint8Array, maxOutputBytes?: number): BodyResult | ArenaBodyResult {
  const result = protect(input, maxOutputBytes === undefined ? {} : { maxOutputBytes });
  const body = protectBody(result.pieces, { mimeType: result.mimeType, filename: `${basename}.${result.extension}`, signals: result.signals }, target);
  if (target && body.buffer === target.buffer && body.byteOffset === target.byteOffset) return { ok: true, kind: 'arena-body', length: body.length };
  return { ok: true, kind: 'body', body };
}
