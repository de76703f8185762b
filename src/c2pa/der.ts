/**
 * Just enough DER (X.690) to issue the server's own C2PA signing certificates (src/c2pa/identity.ts):
 * encoding only, of the handful of types an X.509 v3 certificate needs. Certificates are parsed by
 * Node's X509Certificate, never here.
 */

/** A DER element: tag byte, definite length, content. */
export function tlv(tag: number, content: Uint8Array): Buffer {
  const n = content.length;
  let head: number[];
  if (n < 0x80) head = [tag, n];
  else if (n < 0x100) head = [tag, 0x81, n];
  else if (n < 0x10000) head = [tag, 0x82, n >> 8, n & 0xff];
  else head = [tag, 0x83, n >> 16, (n >> 8) & 0xff, n & 0xff];
  return Buffer.concat([Buffer.from(head), content]);
}

export const seq = (...items: Uint8Array[]): Buffer => tlv(0x30, Buffer.concat(items));
export const set = (...items: Uint8Array[]): Buffer => tlv(0x31, Buffer.concat(items));
export const octets = (b: Uint8Array): Buffer => tlv(0x04, b);
export const bits = (b: Uint8Array, unused = 0): Buffer => tlv(0x03, Buffer.concat([Buffer.from([unused]), b]));
export const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
export const bool = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0]));
/** Context-specific constructed [n] (explicit tagging). */
export const explicit = (n: number, inner: Uint8Array): Buffer => tlv(0xa0 | n, inner);
/** Context-specific primitive [n] (implicit tagging of a primitive). */
export const implicit = (n: number, content: Uint8Array): Buffer => tlv(0x80 | n, content);

/** An INTEGER from unsigned big-endian bytes (a leading zero added when the top bit is set). */
export function uint(b: Uint8Array): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, (v[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : Buffer.from(v));
}

export const small = (n: number): Buffer => uint(Buffer.from([n]));

/** An OBJECT IDENTIFIER from its dotted form. */
export function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const stack = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) stack.unshift((v & 0x7f) | 0x80);
    out.push(...stack);
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime before 2050, GeneralizedTime from then on (RFC 5280 4.1.2.5). */
export function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14); // YYYYMMDDHHMMSS
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}
