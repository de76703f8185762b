/**
 * Response bodies built as bytes in the worker. The protect body is mostly base64: it is written
 * straight into one exactly-sized buffer around the fixed JSON fields, without JSON.stringify walking
 * a multi-megabyte string.
 */
import { createHash } from 'node:crypto';

export interface ProtectFields {
  mimeType: string;
  filename: string;
  signals: string[];
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** `{"imageBase64": ..., "mimeType", "filename", "sha256", "signals"}` as UTF-8 bytes in a standalone (transferable) buffer. */
export function protectBody(produced: Uint8Array, fields: ProtectFields): Buffer {
  const head = Buffer.from('{"imageBase64":"', 'latin1');
  const tail = Buffer.from(
    `","mimeType":${JSON.stringify(fields.mimeType)},"filename":${JSON.stringify(fields.filename)},` +
      `"sha256":"${sha256Hex(produced)}","signals":${JSON.stringify(fields.signals)}}`,
    'utf8',
  );
  const b64Length = Math.ceil(produced.length / 3) * 4;
  // allocUnsafeSlow: never a slice of Node's shared pool, so its ArrayBuffer can be transferred.
  const out = Buffer.allocUnsafeSlow(head.length + b64Length + tail.length);
  head.copy(out, 0);
  const view = Buffer.from(produced.buffer, produced.byteOffset, produced.byteLength);
  const written = out.write(view.toString('base64'), head.length, 'latin1');
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
