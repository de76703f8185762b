/**
 * The request's multipart Content-Type, read without busboy (so the event-loop thread can refuse a
 * request that could never parse before reading its body, without loading the worker's multipart code).
 */
import { OptmarkError } from '../errors.js';

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"[\\t \\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]*"';
const PARAM = new RegExp(`^[ \\t]*;[ \\t]*(${TOKEN})=(${TOKEN}|${QUOTED})`);
const TYPE = new RegExp(`^${TOKEN}/${TOKEN}`);

/**
 * The boundary parameter of a plainly written Content-Type (a type, then `; name=value` parameters,
 * values tokens or quoted strings without escapes): for such headers busboy reads the same boundary
 * (the first `boundary` parameter, its name in any case). `null` when such a header has none;
 * `undefined` when the header is not plainly written, and only busboy can tell.
 */
export function formBoundary(contentType: string): string | null | undefined {
  const type = TYPE.exec(contentType);
  if (!type) return undefined;
  let rest = contentType.slice(type[0].length);
  let boundary: string | null = null;
  while (!/^[ \t]*$/.test(rest)) {
    const p = PARAM.exec(rest);
    if (!p) return undefined;
    const value = p[2]!.startsWith('"') ? p[2]!.slice(1, -1) : p[2]!;
    if (boundary === null && p[1]!.toLowerCase() === 'boundary') boundary = value;
    rest = rest.slice(p[0].length);
  }
  return boundary;
}

/**
 * Throws the 4xx the request's Content-Type deserves, or returns nothing when it is multipart/form-data
 * and may carry a usable boundary: a request that could never parse is refused before its body is read.
 */
export function checkContentType(contentType: string): void {
  if (!/^multipart\/form-data\s*(;|$)/i.test(contentType.trim())) {
    throw new OptmarkError('unsupported_media_type', 'Send multipart/form-data with one "image" file part.');
  }
  if (formBoundary(contentType) === null) {
    throw new OptmarkError('malformed_multipart', 'The multipart Content-Type is not usable: it has no boundary parameter.');
  }
}
