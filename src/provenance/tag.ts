/**
 * The provenance tag as XMP: five simple top-level properties under optmark's own namespace, written
 * as element text on the main rdf:Description. Simple properties, not a structure, because ExifTool
 * keeps unknown-namespace simple properties verbatim when it rewrites a packet (test/provenance.test.ts
 * pins this). What is signed is a canonical text of the four data fields, never the XML, so the tag
 * survives any rewrite that keeps the values.
 */
import type { KeyObject } from 'node:crypto';
import { sign, verify } from 'node:crypto';
import type { Document } from '../xmp/index.js';
import { tokenOf, tokenUri, type XmpView } from '../xmp/index.js';
import { findProperties, removeProperties, setSimpleProperty, valuesOf } from '../xmp/properties.js';
import { KEY_ID_PATTERN } from './keys.js';

export const NS_PROVENANCE = 'https://optmark.dev/ns/provenance/1.0/';
export const PROVENANCE_PREFIX = 'optmark';
/** Domain separation: a signature over this text can never be mistaken for one over anything else. */
const SIGNATURE_DOMAIN = 'optmark provenance tag v1';

/** What a tag vouches for. */
export interface TagFields {
  /** Key id of the signing key (16 hex digits). */
  keyId: string;
  /** Signing time, UTC, whole seconds: 2026-01-31T12:00:00Z. */
  signedAt: string;
  /** The plus:DataMining value vouched for, as its full vocabulary URI. */
  dataMining: string;
  /** `sha256:<hex>` over the content outside the XMP (digest.ts). */
  contentDigest: string;
}

export interface SignedTag extends TagFields {
  /** Base64 Ed25519 signature over signedMessage(fields). */
  signature: string;
}

type Field = keyof SignedTag;

/** Property names in the order they are written. */
const PROPERTIES: ReadonlyArray<readonly [Field, string]> = [
  ['keyId', 'KeyId'],
  ['signedAt', 'SignedAt'],
  ['dataMining', 'DataMining'],
  ['contentDigest', 'ContentDigest'],
  ['signature', 'Signature'],
];

const SIGNED_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const CONTENT_DIGEST = /^sha256:[0-9a-f]{64}$/;
/** 64 bytes in standard base64 with its padding: exactly 86 characters and "==". */
const SIGNATURE = /^[A-Za-z0-9+/]{86}==$/;

/** Why a field value is not acceptable, or undefined when it is. Every field is checked before use. */
function fieldProblem(field: Field, value: string): string | undefined {
  switch (field) {
    case 'keyId':
      return KEY_ID_PATTERN.test(value) ? undefined : 'KeyId is not 16 hex digits';
    case 'signedAt':
      return SIGNED_AT.test(value) && !Number.isNaN(Date.parse(value)) ? undefined : 'SignedAt is not a UTC time';
    case 'dataMining': {
      const token = tokenOf(value);
      return token !== undefined && tokenUri(token) === value ? undefined : 'DataMining is not a PLUS vocabulary URI';
    }
    case 'contentDigest':
      return CONTENT_DIGEST.test(value) ? undefined : 'ContentDigest is not sha256:<hex>';
    case 'signature':
      return SIGNATURE.test(value) ? undefined : 'Signature is not a base64 Ed25519 signature';
  }
}

/**
 * The exact bytes signed: domain line, then one `Name=value` line per field in a fixed order. Values
 * are checked against their forms first, so none holds a line break and the text is unambiguous.
 */
export function signedMessage(fields: TagFields): Buffer {
  return Buffer.from(
    [SIGNATURE_DOMAIN, `KeyId=${fields.keyId}`, `SignedAt=${fields.signedAt}`, `DataMining=${fields.dataMining}`, `ContentDigest=${fields.contentDigest}`].join(
      '\n',
    ),
    'utf8',
  );
}

/** Signs the fields with the private key; throws when a field is not in its form (a bug, not input). */
export function signFields(fields: TagFields, privateKey: KeyObject): SignedTag {
  for (const [field] of PROPERTIES) {
    if (field === 'signature') continue;
    const problem = fieldProblem(field, fields[field]);
    if (problem) throw new Error(`cannot sign provenance tag: ${problem}`);
  }
  return { ...fields, signature: sign(null, signedMessage(fields), privateKey).toString('base64') };
}

/** True when the signature checks against the public key. */
export function signatureHolds(tag: SignedTag, publicKey: KeyObject): boolean {
  try {
    return verify(null, signedMessage(tag), publicKey, Buffer.from(tag.signature, 'base64'));
  } catch {
    return false;
  }
}

/** Replaces any provenance properties in the document with the tag. */
export function writeTag(doc: Document, tag: SignedTag): void {
  removeProperties(doc, (ns) => ns === NS_PROVENANCE);
  for (const [field, name] of PROPERTIES) {
    if (!setSimpleProperty(doc, NS_PROVENANCE, PROVENANCE_PREFIX, name, tag[field])) {
      throw new Error('XMP document has no place for properties'); // mergedDocument guarantees one
    }
  }
}

export type TagReading =
  | { state: 'absent' }
  /** Tag properties are there but do not form a tag; keyId when that one field was readable. */
  | { state: 'malformed'; keyId: string | undefined; problem: string }
  | { state: 'present'; tag: SignedTag };

/**
 * Reads the tag from the main packet and its Extended XMP: the packet protect writes. Other packets
 * are ignored, because they can hold a stale tag protect keeps byte for byte (libvips writes PNG XMP
 * into zTXt, so a re-encoded tagged PNG carries its old tag there). Never throws: anything unusable
 * is `malformed`.
 */
export function readTag(view: XmpView): TagReading {
  const docs = [view.main, view.extended].filter((d): d is Document => d !== undefined);
  const seen = new Map<string, Set<string>>();
  let any = false;
  for (const doc of docs) {
    for (const ref of findProperties(doc, (ns) => ns === NS_PROVENANCE)) {
      any = true;
      const values = seen.get(ref.localName) ?? new Set<string>();
      for (const v of valuesOf(ref)) values.add(v);
      seen.set(ref.localName, values);
    }
  }
  if (!any) return { state: 'absent' };
  const tag: Partial<SignedTag> = {};
  const problems: string[] = [];
  for (const [field, name] of PROPERTIES) {
    const values = [...(seen.get(name) ?? [])];
    if (values.length !== 1) {
      problems.push(values.length === 0 ? `${name} is missing` : `${name} has ${values.length} different values`);
      continue;
    }
    const problem = fieldProblem(field, values[0]!);
    if (problem) problems.push(problem);
    else tag[field] = values[0]!;
  }
  if (problems.length > 0) return { state: 'malformed', keyId: tag.keyId, problem: problems.join('; ') };
  return { state: 'present', tag: tag as SignedTag };
}
