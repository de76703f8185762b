/**
 * Checks the lengths inside a C2PA manifest store before the reference reader sees it (issue #37): every
 * JUMBF box length, every CBOR length and count, and the DER lengths of the certificates in a COSE
 * signature's x5chain must fit in what holds them. The reader (c2pa-rs as wasm) reserves memory for a
 * declared length before it finds the bytes missing, and wasm memory never shrinks: one CBOR text string
 * declaring 2^31-1 bytes in a 139 KB file took a worker's memory to 2 GB for good. A store that fails
 * here is refused (422 content_credentials_malformed) and never read.
 *
 * One pass over the store, each byte visited at most once per nesting level it belongs to (bounded
 * depth), nothing allocated: the cost is a few microseconds per kilobyte.
 */
import { OptmarkError } from '../errors.js';
import { u32be } from '../formats/bytes.js';
import { parseImage, type ParsedImage } from '../formats/index.js';
import { manifestStoreBytes } from '../formats/manifest-store.js';

/** Nesting the check follows at most (JUMBF superboxes, CBOR items, DER elements); deeper is refused. */
export const MAX_STORE_DEPTH = 64;

export class MalformedStoreError extends OptmarkError {
  constructor(what: string) {
    super('content_credentials_malformed', `The image's C2PA manifest store is malformed: ${what}; it was not read.`);
  }
}

const text4 = (b: Uint8Array, at: number): string => String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
/** A type name fit for a message (a mangled one as hex). */
const shown = (t: string): string => (/^[\x20-\x7e]{4}$/.test(t) ? `'${t}'` : `0x${Buffer.from(t, 'latin1').toString('hex')}`);

/** The label of a JUMBF description box's content (after its 16-byte type and toggles), when it has one. */
function labelOf(b: Uint8Array, start: number, end: number): string | undefined {
  if (end - start < 17 || !(b[start + 16]! & 0x02)) return undefined;
  let z = start + 17;
  while (z < end && b[z] !== 0) z++;
  return Buffer.from(b.subarray(start + 17, z)).toString('utf8');
}

/** JUMBF boxes in [start, end): each length within its parent, superboxes walked, CBOR content checked. */
function checkBoxes(b: Uint8Array, start: number, end: number, depth: number): void {
  if (depth > MAX_STORE_DEPTH) throw new MalformedStoreError(`JUMBF boxes nested deeper than ${MAX_STORE_DEPTH}`);
  let pos = start;
  let label: string | undefined;
  while (pos < end) {
    if (end - pos < 8) throw new MalformedStoreError(`a JUMBF box header is cut off (${end - pos} bytes left at offset ${pos})`);
    let length = u32be(b, pos);
    const type = text4(b, pos + 4);
    let header = 8;
    if (length === 1) {
      if (end - pos < 16) throw new MalformedStoreError(`the extended length of JUMBF box ${shown(type)} is cut off`);
      const high = u32be(b, pos + 8);
      length = high * 2 ** 32 + u32be(b, pos + 12);
      header = 16;
    } else if (length === 0) length = end - pos;
    if (length < header || length > end - pos) {
      throw new MalformedStoreError(`JUMBF box ${shown(type)} at offset ${pos} declares ${length} bytes, and ${end - pos} are left in what holds it`);
    }
    const content = pos + header;
    const next = pos + length;
    if (type === 'jumd' && label === undefined) label = labelOf(b, content, next);
    else if (type === 'jumb') checkBoxes(b, content, next, depth + 1);
    else if (type === 'cbor') checkCbor(b, content, next, depth + 1, roleOfBox(label));
    pos = next;
  }
}

/** A CBOR head: major type, argument (a count or length; up to 2^64 as a float, compared only), where the item's content starts. */
function head(b: Uint8Array, pos: number, end: number): { major: number; ai: number; arg: number; at: number } {
  if (pos >= end) throw new MalformedStoreError(`a CBOR item is cut off at offset ${pos}`);
  const major = b[pos]! >> 5;
  const ai = b[pos]! & 0x1f;
  const width = ai < 24 ? 0 : ai === 24 ? 1 : ai === 25 ? 2 : ai === 26 ? 4 : ai === 27 ? 8 : -1;
  if (width < 0) {
    if (ai === 31) return { major, ai, arg: 0, at: pos + 1 };
    throw new MalformedStoreError(`a CBOR item at offset ${pos} has a reserved length encoding (${ai})`);
  }
  if (pos + 1 + width > end) throw new MalformedStoreError(`a CBOR length at offset ${pos} is cut off`);
  let arg = width === 0 ? ai : 0;
  for (let i = 1; i <= width; i++) arg = arg * 256 + b[pos + i]!;
  return { major, ai, arg, at: pos + 1 + width };
}

/**
 * The COSE_Sign1 structures the reader parses further: the claim signature (the `c2pa.signature` box's
 * content) and a CAWG identity assertion's `signature` (a byte string holding one).
 */
const roleOfBox = (label: string | undefined): Role | undefined =>
  label === 'c2pa.signature' ? 'cose' : label !== undefined && /^cawg\.identity(__\d+)?$/.test(label) ? 'identity' : undefined;

/** Every CBOR item in [start, end), in sequence. */
function checkCbor(b: Uint8Array, start: number, end: number, depth: number, role?: Role): void {
  let pos = start;
  while (pos < end) pos = item(b, pos, end, depth, role);
}

type Role = 'cose' | 'protected' | 'headers' | 'x5chain' | 'identity' | 'cose-bytes';
/** CBOR text "signature": the identity assertion's key for its COSE_Sign1. */
const SIGNATURE_KEY = Buffer.from([0x69, ...Buffer.from('signature')]);

/**
 * One CBOR item at `pos`, its lengths and counts within `end`; returns where it ends. `role` marks the
 * COSE parts whose insides are checked too: the protected header (CBOR in a byte string), the x5chain
 * certificates (DER in byte strings).
 */
function item(b: Uint8Array, pos: number, end: number, depth: number, role?: Role): number {
  if (depth > MAX_STORE_DEPTH) throw new MalformedStoreError(`CBOR nested deeper than ${MAX_STORE_DEPTH}`);
  const h = head(b, pos, end);
  const left = end - h.at;
  switch (h.major) {
    case 0:
    case 1:
      if (h.ai === 31) throw new MalformedStoreError(`a CBOR integer at offset ${pos} is indefinite`);
      return h.at;
    case 2:
    case 3: {
      const kind = h.major === 2 ? 'byte' : 'text';
      if (h.ai === 31) {
        let p = h.at;
        for (;;) {
          if (p >= end) throw new MalformedStoreError(`an indefinite CBOR ${kind} string at offset ${pos} has no end`);
          if (b[p] === 0xff) return p + 1;
          const chunk = head(b, p, end);
          if (chunk.major !== h.major || chunk.ai === 31)
            throw new MalformedStoreError(`an indefinite CBOR ${kind} string at offset ${pos} holds a chunk of another type`);
          if (chunk.arg > end - chunk.at) throw tooLong(kind, p, chunk.arg, end - chunk.at);
          p = chunk.at + chunk.arg;
        }
      }
      if (h.arg > left) throw tooLong(kind, pos, h.arg, left);
      const stop = h.at + h.arg;
      if (role === 'protected' && h.major === 2 && h.arg > 0) item(b, h.at, stop, depth + 1, 'headers');
      if (role === 'x5chain' && h.major === 2) checkDer(b, h.at, stop, depth + 1);
      if (role === 'cose-bytes' && h.major === 2) checkCbor(b, h.at, stop, depth + 1, 'cose');
      return stop;
    }
    case 4:
    case 5: {
      const per = h.major === 4 ? 1 : 2;
      const kind = h.major === 4 ? 'array' : 'map';
      if (h.ai !== 31 && h.arg * per > left) {
        throw new MalformedStoreError(`a CBOR ${kind} at offset ${pos} declares ${h.arg} entries, more than the ${left} bytes left can hold`);
      }
      let p = h.at;
      for (let i = 0; h.ai === 31 || i < h.arg; i++) {
        if (h.ai === 31) {
          if (p >= end) throw new MalformedStoreError(`an indefinite CBOR ${kind} at offset ${pos} has no end`);
          if (b[p] === 0xff) return p + 1;
        }
        if (per === 1) p = item(b, p, end, depth + 1, childRole(role, i, undefined));
        else {
          const keyAt = p;
          p = item(b, p, end, depth + 1);
          p = item(b, p, end, depth + 1, childRole(role, i, b.subarray(keyAt, p)));
        }
      }
      return p;
    }
    case 6:
      if (h.ai === 31) throw new MalformedStoreError(`a CBOR tag at offset ${pos} is indefinite`);
      // COSE_Sign1_Tagged (18) keeps the role; any other tag's content is plain CBOR.
      return item(b, h.at, end, depth + 1, role === 'cose' && h.arg === 18 ? 'cose' : undefined);
    default:
      if (h.ai === 31) throw new MalformedStoreError(`a stray CBOR break at offset ${pos}`);
      return h.at;
  }
}

/** COSE_Sign1 is [protected bstr, unprotected map, payload, signature]; x5chain is label 33 in either header. */
function childRole(parent: Role | undefined, index: number, key: Uint8Array | undefined): Role | undefined {
  if (parent === 'cose') return index === 0 ? 'protected' : index === 1 ? 'headers' : undefined;
  if (parent === 'headers' && key !== undefined && key.length === 2 && key[0] === 0x18 && key[1] === 33) return 'x5chain';
  if (parent === 'x5chain') return 'x5chain';
  if (parent === 'identity' && key !== undefined && Buffer.from(key).equals(SIGNATURE_KEY)) return 'cose-bytes';
  return undefined;
}

function tooLong(kind: string, pos: number, declared: number, left: number): MalformedStoreError {
  return new MalformedStoreError(`a CBOR ${kind} string at offset ${pos} declares ${declared} bytes, and ${left} are left in its box`);
}

/** DER elements in [start, end): definite lengths within their parent, constructed ones walked. */
function checkDer(b: Uint8Array, start: number, end: number, depth: number): void {
  if (depth > MAX_STORE_DEPTH) throw new MalformedStoreError(`a certificate's DER nested deeper than ${MAX_STORE_DEPTH}`);
  let pos = start;
  while (pos < end) {
    const tag = b[pos]!;
    let p = pos + 1;
    if ((tag & 0x1f) === 0x1f) {
      while (p < end && b[p]! & 0x80) p++;
      p++;
    }
    if (p >= end) throw new MalformedStoreError(`a certificate's DER element at offset ${pos} is cut off`);
    let length = b[p++]!;
    if (length === 0x80) throw new MalformedStoreError(`a certificate's DER element at offset ${pos} has an indefinite length`);
    if (length > 0x80) {
      const n = length & 0x7f;
      if (n > 4 || p + n > end) throw new MalformedStoreError(`a certificate's DER length at offset ${pos} is cut off or too wide`);
      length = 0;
      for (let i = 0; i < n; i++) length = length * 256 + b[p++]!;
    }
    if (length > end - p) {
      throw new MalformedStoreError(`a certificate's DER element at offset ${pos} declares ${length} bytes, and ${end - p} are left in what holds it`);
    }
    if (tag & 0x20) checkDer(b, p, p + length, depth + 1);
    pos = p + length;
  }
}

/** Throws MalformedStoreError when a length inside the store does not fit (the store's bytes as the container holds them). */
export function checkStoreBytes(store: Uint8Array): void {
  checkBoxes(store, 0, store.length, 0);
}

/**
 * Checks the file's manifest store, if it has one, before any reader sees the file. From the file's
 * structure when the caller holds it; given bytes, it walks the container's headers.
 */
export function checkManifestStore(input: Uint8Array | ParsedImage): void {
  const store = manifestStoreBytes(input instanceof Uint8Array ? parseImage(input) : input);
  if (store !== undefined) checkStoreBytes(store);
}
