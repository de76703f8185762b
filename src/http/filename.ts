/** The suggested file name of a produced image: the upload's base name made safe, or a default. */

const MAX_BASENAME = 100;
const DEFAULT_BASENAME = 'image';

/**
 * Keeps the last path segment of the client's file name, drops its extension, control characters and
 * characters that are unsafe in file names or headers, and bounds its length (the caller appends the
 * produced format's extension).
 */
export function safeBasename(filename: string | undefined): string {
  if (!filename) return DEFAULT_BASENAME;
  let name = filename.split(/[/\\]/).pop() ?? '';
  name = name.normalize('NFC').replace(/[\u0000-\u001f\u007f-\u009f"*:<>?|]/g, '').trim();
  const dot = name.lastIndexOf('.');
  if (dot > 0) name = name.slice(0, dot);
  name = name.replace(/^[.\s]+/, '').replace(/[.\s]+$/, '');
  // Bound by code points, never splitting a surrogate pair.
  name = Array.from(name).slice(0, MAX_BASENAME).join('');
  return name || DEFAULT_BASENAME;
}

/** A request id: the client's X-Request-ID when it is short and plain, otherwise a fresh UUID. */
export function requestId(incoming: string, fresh: () => string): string {
  return /^[A-Za-z0-9._:@-]{1,128}$/.test(incoming) ? incoming : fresh();
}
