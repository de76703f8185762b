/**
 * Verification of the provenance tag. Cheap when there is no tag: one container walk for the XMP and
 * a byte search for the namespace, no XML parse and no hashing. With a tag, the checks run cheapest
 * first (field forms, key lookup, one Ed25519 verify, the opt-out value) and the content is hashed
 * last, so a garbage or foreign tag never costs a pass over the file. Never throws.
 */
import type { KeyObject } from 'node:crypto';
import { detectFormat, type ParsedImage, type XmpPayload } from '../formats/index.js';
import { dataMiningValues, isOptOut, readOptOut, tokenOf, openPayload, type XmpView } from '../xmp/index.js';
import { contentDigest } from './digest.js';
import { NS_PROVENANCE, readTag, signatureHolds } from './tag.js';

export type ProvenanceReason =
  | 'valid'
  | 'absent'
  /** Tag properties present but not a well-formed tag (or in a packet that does not parse). */
  | 'malformed'
  /** This server has no public key for the tag's key id. */
  | 'unknown_key'
  | 'bad_signature'
  /** plus:DataMining beside the tag is not (only) the value it vouches for, or is gone, or another packet flips the opt-out. */
  | 'value_mismatch'
  /** The content outside the XMP changed since signing (pixels, EXIF, ICC, other chunks). */
  | 'digest_mismatch';

export interface ProvenanceReport {
  present: boolean;
  valid: boolean;
  verifiable: boolean;
  reason: ProvenanceReason;
  keyId?: string;
}

/** Where verification finds public keys by key id (the Keyring, or one known key). */
export interface PublicKeys {
  find(keyId: string): Promise<KeyObject | undefined>;
}

const ABSENT: ProvenanceReport = Object.freeze({ present: false, valid: false, verifiable: false, reason: 'absent' });
const NS_BYTES = Buffer.from(NS_PROVENANCE, 'utf8');

/**
 * False only when no packet can hold the tag: every packet is ASCII-compatible and lacks the namespace
 * URI. UTF-16/32 packets (first byte 00, FE or FF) are not searched, they are parsed. A packet that
 * spells the URI with character references is read as untagged: the same as removing the tag.
 */
function mayCarryTag(payload: XmpPayload): boolean {
  for (const p of [...payload.packets, ...payload.extended.values()]) {
    const first = p[0];
    if (first === 0x00 || first === 0xfe || first === 0xff) return true;
    if (Buffer.from(p.buffer, p.byteOffset, p.byteLength).indexOf(NS_BYTES) >= 0) return true;
  }
  return false;
}

function report(present: boolean, verifiable: boolean, reason: ProvenanceReason, keyId?: string): ProvenanceReport {
  return { present, valid: reason === 'valid', verifiable, reason, ...(keyId !== undefined ? { keyId } : {}) };
}

/**
 * Checks the tag in an image: present, verifiable (key known), valid (signature, value and digest hold).
 * Given the file's structure, every check reads it and none walks the file again.
 */
export async function verifyProvenance(input: Uint8Array | ParsedImage, keys: PublicKeys): Promise<ProvenanceReport> {
  let image: ParsedImage;
  let view: XmpView;
  try {
    if (input instanceof Uint8Array) {
      const format = detectFormat(input);
      if (!format) return ABSENT;
      image = format.parse(input);
    } else image = input;
    const payload = image.xmp;
    if (!mayCarryTag(payload)) return ABSENT;
    view = openPayload(payload);
  } catch {
    // A container or packet verify cannot read has no tag it could report on (read() reports the error).
    return ABSENT;
  }
  const reading = readTag(view);
  if (reading.state === 'absent') return view.unreadable > 0 ? report(true, false, 'malformed') : ABSENT;
  if (reading.state === 'malformed') {
    const keyId = reading.keyId;
    return report(true, keyId !== undefined && (await findKey(keys, keyId)) !== undefined, 'malformed', keyId);
  }
  const { tag } = reading;
  const key = await findKey(keys, tag.keyId);
  if (!key) return report(true, false, 'unknown_key', tag.keyId);
  if (!signatureHolds(tag, key)) return report(true, true, 'bad_signature', tag.keyId);
  if (!vouchedValueHolds(view, tag.dataMining)) return report(true, true, 'value_mismatch', tag.keyId);
  return report(true, true, digestHolds(image, tag.contentDigest) ? 'valid' : 'digest_mismatch', tag.keyId);
}

/** The content digest (C2PA manifest store left out), or for a tag signed before that rule, with the store. */
function digestHolds(image: ParsedImage, signed: string): boolean {
  try {
    if (contentDigest(image.format, image) === signed) return true;
    return image.manifestStore !== undefined && contentDigest(image.format, image, { withManifestStore: true }) === signed;
  } catch {
    return false; // structure past the XMP is damaged: it is not the content that was signed
  }
}

/**
 * The vouched value holds when the packet the tag sits in says exactly that value (every DataMining
 * value there, at least one), and the file as a whole reads the same way (optedOut as verify reports
 * it, over every packet): a packet elsewhere cannot turn a vouched opt-out into "allowed" or back.
 */
function vouchedValueHolds(view: XmpView, vouchedValue: string): boolean {
  const vouched = tokenOf(vouchedValue);
  const own = dataMiningValues({ ...view, others: [] });
  if (own.length === 0 || own.some((v) => tokenOf(v) !== vouched)) return false;
  return readOptOut(view).optedOut === isOptOut(vouchedValue);
}

async function findKey(keys: PublicKeys, keyId: string): Promise<KeyObject | undefined> {
  try {
    return await keys.find(keyId);
  } catch {
    return undefined;
  }
}
