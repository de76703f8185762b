/** The protect pipeline: the opt-out field in, the JSON answer with the produced bytes out. */
import { createHash } from 'node:crypto';
import { CREDENTIALS_HEADER } from '../c2pa/modes.js';
import { protectBody } from './body.js';
import type { CredentialsPolicy } from './credentials.js';
import { NO_LAYERS, runMark } from './mark.js';

/** A JSON protect answer: its body and the header saying what happened to Content Credentials. */
export interface ProtectAnswer {
  body: Uint8Array;
  headers: Record<string, string>;
}

/**
 * Protects `image` and returns the answer's body (UTF-8 JSON). It is written into `into` when it fits
 * there (the returned array is then a view of `into`'s memory), otherwise into an array of its own.
 * `maxOutputBytes` is the server's upload limit: protect refuses (output_too_large) to answer with a
 * file the server would not accept back. `policy` says what happens to Content Credentials.
 */
export async function runProtect(
  image: Uint8Array,
  basename: string,
  policy: CredentialsPolicy,
  into?: Uint8Array,
  maxOutputBytes?: number,
): Promise<ProtectAnswer> {
  const result = await runMark(image, NO_LAYERS, undefined, policy, maxOutputBytes === undefined ? {} : { maxOutputBytes });
  const body = protectBody(
    result.pieces,
    { mimeType: result.mimeType, filename: `${basename}.${result.extension}`, signals: result.signals, warnings: result.answerWarnings },
    into,
  );
  return { body, headers: { [CREDENTIALS_HEADER]: result.credentials! } };
}

/** A raw protect answer: the marked image's bytes and the headers that describe them. */
export interface RawProtectAnswer {
  body: Uint8Array;
  headers: Record<string, string>;
}

/** `attachment` with an ASCII fallback name and the exact UTF-8 name (RFC 6266, RFC 8187). */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const exact = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return ascii === filename ? `attachment; filename="${ascii}"` : `attachment; filename="${ascii}"; filename*=UTF-8''${exact}`;
}

/**
 * Protects `image` and returns the marked bytes themselves (for `Accept: image/*`), written into `into`
 * when they fit (the returned array is then a view of its memory), with their Content-Type,
 * Content-Disposition, SHA-256 as `Repr-Digest` (RFC 9530), the signals (`Optmark-Signals`) and the
 * warning codes (`Optmark-Warnings`, only when there are any) and what happened to Content Credentials
 * (`Optmark-Content-Credentials`).
 */
export async function runProtectRaw(
  image: Uint8Array,
  basename: string,
  policy: CredentialsPolicy,
  into?: Uint8Array,
  maxOutputBytes?: number,
): Promise<RawProtectAnswer> {
  const result = await runMark(image, NO_LAYERS, undefined, policy, maxOutputBytes === undefined ? {} : { maxOutputBytes });
  let size = 0;
  for (const p of result.pieces) size += p.length;
  const body = into && into.length >= size ? into.subarray(0, size) : Buffer.allocUnsafeSlow(size);
  const hash = createHash('sha256');
  let at = 0;
  for (const p of result.pieces) {
    body.set(p, at);
    at += p.length;
    hash.update(p);
  }
  const headers: Record<string, string> = {
    'Content-Type': result.mimeType,
    'Content-Disposition': contentDisposition(`${basename}.${result.extension}`),
    'Repr-Digest': `sha-256=:${hash.digest('base64')}:`,
    'Optmark-Signals': result.signals.join(', '),
    [CREDENTIALS_HEADER]: result.credentials!,
  };
  if (result.answerWarnings.length > 0) headers['Optmark-Warnings'] = result.answerWarnings.map((w) => w.code).join(', ');
  return { body, headers };
}
