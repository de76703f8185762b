/**
 * Response bodies built as bytes in the worker. The protect body is mostly base64: it is written
 * straight into one exactly-sized buffer around the fixed JSON fields, without JSON.stringify walking
 * a multi-megabyte string.
 */
import { createHash } from 'node:crypto';
import type { Warning } from '../formats/complete.js';
import { base64Into, base64Length } from './base64.js';

export interface ProtectFields {
  mimeType: string;
  filename: string;
  signals: string[];
  /** The shared `warnings` array of `{code, message}` (empty when there is nothing to say). */
  warnings?: readonly Warning[];
}

/** SHA-256 (hex) of the bytes, or of the concatenation of the pieces. */
export function sha256Hex(bytes: Uint8Array | readonly Uint8Array[]): string {
  const hash = createHash('sha256');
  if (bytes instanceof Uint8Array) hash.update(bytes);
  else for (const piece of bytes) hash.update(piece);
  return hash.digest('hex');
}

/**
 * `{"imageBase64", "mimeType", "filename", "sha256", "signals"}` as UTF-8 bytes, `produced` being the
 * image whole or as pieces in order. Written into `target` when it is given and large enough (the
 * returned view then shares its memory), otherwise into a new standalone (transferable) buffer.
 */
export function protectBody(produced: Uint8Array | readonly Uint8Array[], fields: ProtectFields, target?: Uint8Array): Uint8Array {
  const pieces = produced instanceof Uint8Array ? [produced] : produced;
  let size = 0;
  for (const p of pieces) size += p.length;
  const head = Buffer.from('{"imageBase64":"', 'latin1');
  const tail = Buffer.from(
    `","mimeType":${JSON.stringify(fields.mimeType)},"filename":${JSON.stringify(fields.filename)},` +
      `"sha256":"${sha256Hex(pieces)}","signals":${JSON.stringify(fields.signals)},"warnings":${JSON.stringify(fields.warnings ?? [])}}`,
    'utf8',
  );
  const b64Length = base64Length(size);
  const total = head.length + b64Length + tail.length;
  // allocUnsafeSlow: never a slice of Node's shared pool, so its ArrayBuffer can be transferred.
  const out = target && target.length >= total ? Buffer.from(target.buffer, target.byteOffset, total) : Buffer.allocUnsafeSlow(total);
  head.copy(out, 0);
  const written = base64Into(pieces, out, head.length);
  if (written !== b64Length) throw new Error(`base64 length ${written} != ${b64Length}`);
  tail.copy(out, head.length + b64Length);
  return out;
}

/** A small JSON body in a standalone buffer. */
export function jsonBody(value: unknown): Buffer {
  const text = JSON.stringify(value);
  const out = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  out.write(text, 0, 'utf8');
  return out;
}
