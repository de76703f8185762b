/**
 * XMP-level operations over what a container found: open the packets, read the opt-out, build the
 * merged document to write back, and encode it for the container's size limit (Extended XMP).
 * Nothing here knows about markers, chunks or file layouts.
 */
import { createHash } from 'node:crypto';
import { LimitExceededError } from '../errors.js';
import type { XmpPayload, XmpToWrite } from '../formats/types.js';
import { NS_PLUS, NS_PLUS_HTTPS, NS_RDF, NS_X, NS_XMP_NOTE } from './namespaces.js';
import { type Document, type Element, emptyPacket, parsePacket, serializeBare, serializeNode, serializePacket } from './packet.js';
import { findProperties, mergeProperties, nodeElements, removeProperties, setSimpleProperty, valuesOf } from './properties.js';
import { type DataMiningToken, isOptOut, tokenOf, tokenUri } from './vocab.js';

export { DATA_MINING_TOKENS, DEFAULT_TOKEN, isOptOut, tokenOf, tokenUri, type DataMiningToken } from './vocab.js';
export type { Document } from './packet.js';

/** The packets of one file, parsed. */
export interface XmpView {
  main: Document | undefined;
  /** Extended XMP the main packet names (or the only one present when it names none). */
  extended: Document | undefined;
  /** The GUID the main packet names in xmpNote:HasExtendedXMP, if any. */
  extendedGuid: string | undefined;
  /** Further standalone packets (duplicates, PNG packets after IDAT or compressed). */
  others: Document[];
  /** Packets that were present but not well-formed. */
  unreadable: number;
}

const isDataMining = (ns: string, local: string): boolean => local === 'DataMining' && (ns === NS_PLUS || ns === NS_PLUS_HTTPS);
const isHasExtended = (ns: string, local: string): boolean => ns === NS_XMP_NOTE && local === 'HasExtendedXMP';

/** Parses every packet a container found. */
export function openPayload(payload: XmpPayload): XmpView {
  let unreadable = 0;
  const parse = (bytes: Uint8Array): Document | undefined => {
    const doc = parsePacket(bytes);
    if (!doc) unreadable++;
    return doc;
  };
  const [first, ...rest] = payload.packets;
  const main = first ? parse(first) : undefined;
  const others = rest.map(parse).filter((d): d is Document => d !== undefined);
  let extendedGuid: string | undefined;
  if (main) {
    const named = findProperties(main, isHasExtended).flatMap(valuesOf)[0];
    if (named) extendedGuid = named.toUpperCase();
  }
  let extBytes = extendedGuid ? payload.extended.get(extendedGuid) : undefined;
  if (!extBytes && !extendedGuid && payload.extended.size === 1) extBytes = [...payload.extended.values()][0];
  const extended = extBytes ? parse(extBytes) : undefined;
  return { main, extended, extendedGuid, others, unreadable };
}

function allDocs(view: XmpView): Document[] {
  return [view.main, view.extended, ...view.others].filter((d): d is Document => d !== undefined);
}

/** Every plus:DataMining value, in whatever form and prefix it is written, across all packets. */
export function dataMiningValues(view: XmpView): string[] {
  return allDocs(view).flatMap((doc) => findProperties(doc, isDataMining).flatMap(valuesOf));
}

export interface OptOutReading {
  optedOut: boolean;
  /** The raw values found, as written. */
  values: string[];
  /** The token of the first prohibiting value, else of the first recognised one. */
  token: DataMiningToken | undefined;
}

/** Reads the opt-out: opted out exactly when a prohibiting value is present. */
export function readOptOut(view: XmpView): OptOutReading {
  const values = dataMiningValues(view);
  const optedOut = values.some(isOptOut);
  const prohibiting = values.find(isOptOut);
  const token = tokenOf(prohibiting ?? values.find((v) => tokenOf(v) !== undefined) ?? '');
  return { optedOut, values, token };
}

/**
 * True when the main packet already says exactly `token` in its canonical form and nothing else
 * disagrees. Other packets can only be ones the container keeps beside the main one (PNG tEXt/zTXt):
 * they may repeat the value, never contradict it.
 */
export function carriesExactly(view: XmpView, token: DataMiningToken): boolean {
  if (!view.main) return false;
  const inMain = findProperties(view.main, isDataMining);
  if (inMain.length !== 1 || inMain[0]!.namespaceURI !== NS_PLUS) return false;
  const values = valuesOf(inMain[0]!);
  if (values.length !== 1 || values[0] !== tokenUri(token)) return false;
  if (view.extended && findProperties(view.extended, isDataMining).length > 0) return false;
  const uri = tokenUri(token);
  return view.others.every((doc) => findProperties(doc, isDataMining).flatMap(valuesOf).every((v) => v === uri));
}

/** One document holding everything the file's packets say: main, then Extended XMP, then the others. */
export function mergedDocument(view: XmpView): Document {
  const base = view.main && hasXmpRoot(view.main) ? view.main : emptyPacket();
  if (view.main && base !== view.main) mergeProperties(base, view.main);
  if (view.extended) mergeProperties(base, view.extended);
  for (const other of view.others) mergeProperties(base, other);
  removeProperties(base, isHasExtended);
  return base;
}

function hasXmpRoot(doc: Document): boolean {
  const root = doc.documentElement;
  if (!root) return false;
  return (root.namespaceURI === NS_X && (root.localName === 'xmpmeta' || root.localName === 'xapmeta')) || (root.namespaceURI === NS_RDF && root.localName === 'RDF');
}

/** Sets plus:DataMining to the token's URI, replacing every existing value (also an allowing one). */
export function setDataMining(doc: Document, token: DataMiningToken): void {
  if (!setSimpleProperty(doc, NS_PLUS, 'plus', 'DataMining', tokenUri(token), isDataMining)) {
    throw new Error('XMP document has no place for properties'); // mergedDocument guarantees one
  }
}

const encoder = new TextEncoder();

/**
 * Encodes the document for a container whose main packet holds at most `maxMainBytes`. When it does
 * not fit, the largest element properties move to Extended XMP (XMP spec part 3, 1.1.3.1) until the
 * main packet fits; DataMining always stays in the main packet, where every reader finds it.
 */
export function encodeForContainer(doc: Document, maxMainBytes: number): XmpToWrite {
  const whole = encoder.encode(serializePacket(doc));
  if (whole.length <= maxMainBytes) return { main: whole };
  const movable: Array<{ el: Element; size: number }> = [];
  for (const ref of findProperties(doc, (ns, local) => !isDataMining(ns, local))) {
    if (ref.element) movable.push({ el: ref.element, size: Buffer.byteLength(serializeNode(ref.element)) });
  }
  movable.sort((a, b) => b.size - a.size);
  const ext = emptyPacket();
  const extDesc = nodeElements(ext)[0]!;
  // Room for the HasExtendedXMP property and namespace declarations added below.
  const reserve = 400;
  let estimate = whole.length;
  let moved = 0;
  for (const { el, size } of movable) {
    if (estimate + reserve <= maxMainBytes) break;
    extDesc.appendChild(ext.importNode(el, true));
    el.parentNode?.removeChild(el);
    estimate -= size;
    moved++;
  }
  if (moved === 0) throw new LimitExceededError('XMP packet too large for this container');
  const extBytes = encoder.encode(serializeBare(ext));
  const guid = createHash('md5').update(extBytes).digest('hex').toUpperCase();
  setSimpleProperty(doc, NS_XMP_NOTE, 'xmpNote', 'HasExtendedXMP', guid);
  const main = encoder.encode(serializePacket(doc));
  if (main.length > maxMainBytes) throw new LimitExceededError('XMP packet too large for this container even with Extended XMP');
  return { main, extended: { guid, data: extBytes } };
}
