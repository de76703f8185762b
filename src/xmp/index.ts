/**
 * XMP-level operations over what a container found: open the packets, read the opt-out, build the
 * merged document to write back, and encode it for the container's size limit (Extended XMP).
 * Nothing here knows about markers, chunks or file layouts.
 */
import { createRequire } from 'node:module';
import { LimitExceededError } from '../errors.js';
import { MAX_XMP_PACKETS, OutputTooLargeError } from '../formats/limits.js';
import type { XmpPayload, XmpToWrite } from '../formats/types.js';
import { NS_PLUS, NS_PLUS_HTTPS, NS_RDF, NS_TDMREP, NS_X, NS_XMP_NOTE } from './namespaces.js';
import {
  type Document,
  MAX_MARKUP_PER_FILE,
  MAX_PACKET_BYTES,
  emptyPacket,
  markupBudget,
  markupOf,
  parsePacket,
  serializeBare,
  serializeNode,
  serializePacket,
} from './packet.js';
import {
  type PropertyRef,
  attrAsElement,
  findProperties,
  mergeProperties,
  nodeElements,
  removeProperties,
  removePropertyRefs,
  setSimpleProperty,
  simpleValueOf,
  valuesOf,
} from './properties.js';
import { type RslReading, readRsl } from './rsl.js';
import { DATA_MINING_TOKENS, type DataMiningToken, isOptOut, tokenOf, tokenUri } from './vocab.js';

export type { RslReading };

let cryptoModule: typeof import('node:crypto') | undefined;
/** node:crypto, loaded on first use (a batch of files without Extended XMP never needs it). */
const nodeCrypto = (): typeof import('node:crypto') => (cryptoModule ??= createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto'));

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

/** Standalone packets one file may carry; real files have one, sometimes a stray duplicate or two. */
export const MAX_PACKETS = MAX_XMP_PACKETS;
/**
 * Properties protect copies between documents (merging Extended XMP and further packets into the main
 * one). xmldom copies a node in tens of microseconds; real files merge a handful.
 */
export const MAX_MERGED_PROPERTIES = 20_000;

/** Parses every packet a container found, within one markup budget for the whole file. */
export function openPayload(payload: XmpPayload): XmpView {
  if (payload.packets.length > MAX_PACKETS) throw new LimitExceededError('the image carries more XMP packets than the processing limit');
  let unreadable = 0;
  const budget = markupBudget();
  const parse = (bytes: Uint8Array): Document | undefined => {
    const doc = parsePacket(bytes, budget);
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

/** What a file's packets say, as read() and verify ask it: the opt-out, TDMRep and an RSL licence. */
export interface XmpReading {
  optOut: OptOutReading;
  tdmrep: TdmRepReading;
  rsl: RslReading;
}

/**
 * readOptOut and readTdmRep over openPayload(payload). A file carrying exactly optmark's fresh packet
 * (what protect writes into every file that had no XMP, so most of what it is asked to verify) is read
 * without a parse, and without loading the XML library at all (see freshPackets).
 */
export function readPayload(payload: XmpPayload): XmpReading {
  const only = payload.packets.length === 1 && payload.extended.size === 0 ? payload.packets[0]! : undefined;
  if (only) {
    for (const [token, f] of freshPackets()) {
      if (only.length === f.bytes.length && Buffer.from(only.buffer, only.byteOffset, only.length).equals(f.bytes)) return freshReading(token);
    }
  }
  return readView(openPayload(payload));
}

/** What a parse of the packets says: the opt-out, TDMRep and an RSL licence. */
export function readView(view: XmpView): XmpReading {
  return { optOut: readOptOut(view), tdmrep: readTdmRep(view), rsl: readRsl(allDocs(view)) };
}

/** What a parse of the fresh packet of `token` reads (a test holds them equal). */
function freshReading(token: DataMiningToken): XmpReading {
  const uri = tokenUri(token);
  return {
    optOut: { optedOut: isOptOut(uri), values: [uri], token: tokenOf(uri) },
    tdmrep: { reserved: false, policy: undefined },
    rsl: { prohibitsTraining: false },
  };
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

export interface TdmRepReading {
  /** tdm:reservation = 1 in any packet (text and data mining rights reserved). */
  reserved: boolean;
  /** The first tdm:policy value (a URL of the policy), if any. */
  policy: string | undefined;
}

/** W3C TDMRep in XMP: `tdm:reservation` (1 = reserved, 0 = not) and `tdm:policy`, across all packets. */
export function readTdmRep(view: XmpView): TdmRepReading {
  let reserved = false;
  let policy: string | undefined;
  for (const doc of allDocs(view)) {
    for (const ref of findProperties(doc, (ns, local) => ns === NS_TDMREP && (local === 'reservation' || local === 'policy'))) {
      const values = valuesOf(ref);
      if (ref.localName === 'reservation') reserved ||= values.some((v) => v === '1');
      else policy ??= values.find((v) => v !== '');
    }
  }
  return { reserved, policy };
}

/**
 * True when the main packet already says exactly `token` in its canonical form and nothing else
 * disagrees. Other packets can only be ones the container keeps beside the main one (PNG tEXt/zTXt):
 * they may repeat the value, never contradict it. The value must be the token's URI as written, white
 * space and all: readers that compare it as a string (ExifTool reports it raw) do not trim it, so a
 * padded one is written again.
 */
export function carriesExactly(view: XmpView, token: DataMiningToken): boolean {
  if (!view.main) return false;
  const uri = tokenUri(token);
  const inMain = findProperties(view.main, isDataMining);
  if (inMain.length !== 1 || inMain[0]!.namespaceURI !== NS_PLUS || simpleValueOf(inMain[0]!) !== uri) return false;
  if (view.extended && findProperties(view.extended, isDataMining).length > 0) return false;
  return view.others.every((doc) => findProperties(doc, isDataMining).every((ref) => simpleValueOf(ref) === uri));
}

/** One document holding everything the file's packets say: main, then Extended XMP, then the others. */
export function mergedDocument(view: XmpView): Document {
  const base = view.main && hasXmpRoot(view.main) ? view.main : emptyPacket();
  const incoming = [base !== view.main ? view.main : undefined, view.extended, ...view.others].filter((d): d is Document => d !== undefined);
  let count = 0;
  for (const doc of incoming) count += findProperties(doc, () => true).length;
  if (count > MAX_MERGED_PROPERTIES) throw new LimitExceededError('XMP: more properties to merge than the processing limit');
  for (const doc of incoming) mergeProperties(base, doc);
  removeProperties(base, isHasExtended);
  return base;
}

function hasXmpRoot(doc: Document): boolean {
  const root = doc.documentElement;
  if (!root) return false;
  return (
    (root.namespaceURI === NS_X && (root.localName === 'xmpmeta' || root.localName === 'xapmeta')) || (root.namespaceURI === NS_RDF && root.localName === 'RDF')
  );
}

const encoder = new TextEncoder();

/** A fresh packet: its bytes and its markup count (checkOutputMarkup). */
interface FreshPacket {
  bytes: Uint8Array;
  markup: number;
}

let fresh: Map<DataMiningToken, FreshPacket> | undefined;

/**
 * The fresh packet of every token, made once per process from its text (freshPacketText; a test holds it
 * equal to what the DOM path builds, freshPacketFromDom). Which path runs when: protect writes this packet
 * into a file that has no XMP at all and rewrites every other file through the DOM; readPayload reads a
 * file carrying exactly this packet without a parse. Kept because files without XMP are the common case:
 * without it, protect took 12-37% more server CPU per request on small files, and `optmark verify
 * --skip-fingerprint` on a folder of marked JPEGs 2.3x the CPU (it parsed every file's packet with the XML
 * library, which it then had to load); bench/RESULTS.md.
 */
function freshPackets(): Map<DataMiningToken, FreshPacket> {
  if (!fresh) {
    fresh = new Map();
    for (const token of Object.keys(DATA_MINING_TOKENS) as DataMiningToken[]) {
      const bytes = encoder.encode(freshPacketText(token));
      fresh.set(token, { bytes, markup: markupOf(bytes) });
    }
  }
  return fresh;
}

/** The packet protect writes into a file that has no XMP at all (the same bytes for a token, made once). */
export function freshPacket(token: DataMiningToken): Uint8Array {
  return freshPackets().get(token)!.bytes;
}

/** The fresh packet's text, written out. */
export function freshPacketText(token: DataMiningToken): string {
  return (
    `<?xpacket begin="\uFEFF" id="W5M0MpCehiHzreSzNTczkc9d"?>\n<x:xmpmeta xmlns:x="${NS_X}">\n <rdf:RDF xmlns:rdf="${NS_RDF}">\n` +
    `  <rdf:Description rdf:about="" xmlns:plus="${NS_PLUS}">\n   <plus:DataMining>${tokenUri(token)}</plus:DataMining>\n </rdf:Description>\n` +
    ` </rdf:RDF>\n</x:xmpmeta>\n<?xpacket end="w"?>`
  );
}

/** The fresh packet built the way every other packet is: an empty document, the field set, serialised. */
export function freshPacketFromDom(token: DataMiningToken): string {
  const doc = emptyPacket();
  setDataMining(doc, token);
  return serializePacket(doc);
}

/** Sets plus:DataMining to the token's URI, replacing every existing value (also an allowing one). */
export function setDataMining(doc: Document, token: DataMiningToken): void {
  if (!setSimpleProperty(doc, NS_PLUS, 'plus', 'DataMining', tokenUri(token), isDataMining)) {
    throw new Error('XMP document has no place for properties'); // mergedDocument guarantees one
  }
}

/**
 * Encodes the document for a container whose main packet holds at most `maxMainBytes`. When it does
 * not fit and the container has Extended XMP, the largest properties move there (XMP spec part 3,
 * 1.1.3.1) until the main packet fits; DataMining always stays in the main packet, where every reader
 * finds it. No packet is larger than the reader's own MAX_PACKET_BYTES: a packet that does not fit is
 * OutputTooLargeError (protect never writes what it would refuse to read).
 */
export function encodeForContainer(doc: Document, maxMainBytes: number, extendedXmp = true): XmpToWrite {
  const whole = encoder.encode(serializePacket(doc));
  const mainLimit = Math.min(maxMainBytes, MAX_PACKET_BYTES);
  if (whole.length <= mainLimit) return { main: whole };
  if (!extendedXmp) throw new OutputTooLargeError(`The image's XMP would be ${whole.length} bytes once rewritten; a packet may have ${MAX_PACKET_BYTES}.`);
  maxMainBytes = mainLimit;
  const movable = findProperties(doc, (ns, local) => !isDataMining(ns, local)).map((ref) => ({ ref, size: serializedSize(ref) }));
  movable.sort((a, b) => b.size - a.size);
  const ext = emptyPacket();
  const extDesc = nodeElements(ext)[0]!;
  // Room for the HasExtendedXMP property and namespace declarations added below.
  const reserve = 400;
  let estimate = whole.length;
  const moved: PropertyRef[] = [];
  for (const { ref, size } of movable) {
    if (estimate + reserve <= maxMainBytes) break;
    extDesc.appendChild(ref.element ? ext.importNode(ref.element, true) : attrAsElement(ext, ref.attr!));
    moved.push(ref);
    estimate -= size;
  }
  if (moved.length === 0) throw new OutputTooLargeError('XMP packet too large for this container');
  removePropertyRefs(moved);
  const extBytes = encoder.encode(serializeBare(ext));
  if (extBytes.length > MAX_PACKET_BYTES)
    throw new OutputTooLargeError(`The image's Extended XMP would be ${extBytes.length} bytes once rewritten; a packet may have ${MAX_PACKET_BYTES}.`);
  const guid = nodeCrypto().createHash('md5').update(extBytes).digest('hex').toUpperCase();
  setSimpleProperty(doc, NS_XMP_NOTE, 'xmpNote', 'HasExtendedXMP', guid);
  const main = encoder.encode(serializePacket(doc));
  if (main.length > maxMainBytes) throw new OutputTooLargeError('XMP packet too large for this container even with Extended XMP');
  return { main, extended: { guid, data: extBytes } };
}

function serializedSize(ref: PropertyRef): number {
  if (ref.element) return Buffer.byteLength(serializeNode(ref.element));
  const a = ref.attr!;
  return Buffer.byteLength(a.value) + a.name.length + 4;
}

/**
 * Throws OutputTooLargeError when the packets protect is about to write, together with the ones the
 * container keeps beside them, hold more markup than a file may (src/xmp/packet.ts MAX_MARKUP_PER_FILE):
 * verify would refuse that file.
 */
export function checkOutputMarkup(xmp: XmpToWrite, kept: readonly Uint8Array[]): void {
  let total = markupOfMain(xmp.main) + (xmp.extended ? markupOf(xmp.extended.data) : 0);
  for (const p of kept) total += markupOf(p);
  if (total > MAX_MARKUP_PER_FILE)
    throw new OutputTooLargeError(`The image's XMP would hold more markup than a file may (${MAX_MARKUP_PER_FILE} nodes) once rewritten.`);
}

/** The markup of a main packet to write: counted once for a fresh packet (protect asks for every file). */
function markupOfMain(main: Uint8Array): number {
  for (const f of freshPackets().values()) if (f.bytes === main) return f.markup;
  return markupOf(main);
}
