/** The protect pipeline: opt-out field in, JSON body with the produced bytes out. */
import { protect } from '../marking/engine.js';
import { protectBody } from './body.js';
import type { BodyResult, ProtectTask } from './tasks.js';

export function runProtect(task: ProtectTask): BodyResult {
  const result = protect(task.input);
  const body = protectBody(result.pieces, {
    mimeType: result.mimeType,
    filename: `${task.basename}.${result.extension}`,
    signals: result.signals,
  });
  return { ok: true, kind: 'body', body };
}
