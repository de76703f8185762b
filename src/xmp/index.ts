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
import { DATA_MINING_TOKENS, type DataMiningToken, isOptOut, tokenOf, tokenUri } from './vocab.js';

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

/**
 * What a file's packets say, as read() and verify ask it: the opt-out and TDMRep. A pure function of the
 * packets' bytes (and the Extended XMP the container reassembled), so a reading is reused for the same
 * bytes without parsing them again (readPayload).
 */
export interface XmpReading {
  optOut: OptOutReading;
  tdmrep: TdmRepReading;
}

/**
 * Readings already made, keyed by the exact bytes of every packet (payloadKey): a folder of files that
 * carry the same packet (optmark's own, written into files that had none, or one pipeline's template)
 * pays for one parse. Bounded in entries and in the bytes a key may hold; errors are never kept (a
 * payload that throws throws again, the same way).
 */
const readings = new Map<string, XmpReading>();
const READINGS_MAX = 128;
/** Packets (all of one file's together) larger than this are parsed every time, not kept. */
const READING_KEY_MAX_BYTES = 64 * 1024;
/** The fresh packets' readings, known without parsing them (a test holds them equal to the parsed ones). */
let freshReadings: Map<string, XmpReading> | undefined;

/** The exact bytes of a payload as one string (length-prefixed, so two payloads never share one), or undefined when too large. */
function payloadKey(payload: XmpPayload): string | undefined {
  let size = 0;
  for (const p of payload.packets) size += p.length;
  for (const [guid, data] of payload.extended) size += guid.length + data.length;
  if (size > READING_KEY_MAX_BYTES) return undefined;
  let key = `${payload.packets.length}`;
  for (const p of payload.packets) key += `|${p.length}|${latin1(p)}`;
  for (const [guid, data] of payload.extended) key += `#${guid.length}|${guid}${data.length}|${latin1(data)}`;
  return key;
}

const latin1 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');

function readingOf(view: XmpView): XmpReading {
  return { optOut: readOptOut(view), tdmrep: readTdmRep(view) };
}

/** A copy a caller may change without touching the kept reading. */
function copyReading(r: XmpReading): XmpReading {
  return { optOut: { ...r.optOut, values: [...r.optOut.values] }, tdmrep: { ...r.tdmrep } };
}

function freshReading(key: string): XmpReading | undefined {
  if (!freshReadings) {
    freshReadings = new Map();
    for (const token of Object.keys(DATA_MINING_TOKENS) as DataMiningToken[]) {
      const uri = tokenUri(token);
      const k = payloadKey({ packets: [freshPacket(token)], extended: new Map(), canonical: true, keptOnRewrite: 0 })!;
      freshReadings.set(k, { optOut: { optedOut: isOptOut(uri), values: [uri], token: tokenOf(uri) }, tdmrep: { reserved: false, policy: undefined } });
    }
  }
  return freshReadings.get(key);
}

/**
 * The last view parsed for a reading, with its key: verify reads a file (readPayload) and then checks
 * its provenance tag (viewOfPayload) over the same packets, which are then parsed once. Only for
 * callers that never change the documents (protect opens its own with openPayload).
 */
let lastView: { key: string; view: XmpView } | undefined;

/**
 * The last file's one packet and its reading: a folder's files in a row mostly carry the same packet,
 * which a byte comparison finds before any key is built.
 */
let lastSingle: { packet: Buffer; reading: XmpReading } | undefined;

/** readOptOut and readTdmRep over openPayload(payload), parsing only packets not read before (see `readings`). */
export function readPayload(payload: XmpPayload): XmpReading {
  const single = payload.packets.length === 1 && payload.extended.size === 0 ? payload.packets[0]! : undefined;
  if (single && lastSingle?.packet.equals(single)) return copyReading(lastSingle.reading);
  const reading = readPayloadKeyed(payload);
  if (single && single.length <= READING_KEY_MAX_BYTES) lastSingle = { packet: Buffer.from(single), reading: copyReading(reading) };
  return reading;
}

function readPayloadKeyed(payload: XmpPayload): XmpReading {
  const key = payloadKey(payload);
  if (key === undefined) return readingOf(openPayload(payload));
  const known = readings.get(key) ?? freshReading(key);
  if (known) return copyReading(known);
  const view = openPayload(payload);
  lastView = { key, view };
  const reading = readingOf(view);
  if (readings.size >= READINGS_MAX) readings.delete(readings.keys().next().value!);
  readings.set(key, copyReading(reading));
  return reading;
}

/**
 * openPayload for a reader that never changes the documents: the view readPayload parsed last when it is
 * of the same bytes, else a fresh parse.
 */
export function viewOfPayload(payload: XmpPayload): XmpView {
  const key = payloadKey(payload);
  if (key !== undefined && lastView?.key === key) return lastView.view;
  const view = openPayload(payload);
  if (key !== undefined) lastView = { key, view };
  return view;
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
const freshPackets = new Map<DataMiningToken, Uint8Array>();

/**
 * The packet protect writes into a file that has no XMP at all: always the same bytes for a token, so
 * it is made once and reused. Files without XMP are the common case in bulk ingestion, and this spares
 * each of them an XML parse and serialisation, and a batch of them the loading of the XML library.
 * It is the text the DOM path builds (freshPacketFromDom), character for character: a test holds them
 * equal for every token.
 */
export function freshPacket(token: DataMiningToken): Uint8Array {
  let packet = freshPackets.get(token);
  if (!packet) {
    packet = encoder.encode(freshPacketText(token));
    freshPackets.set(token, packet);
    freshMarkup.set(packet, markupOf(packet));
  }
  return packet;
}

/** The markup of each fresh packet, counted once (checkOutputMarkup asks for every file). */
const freshMarkup = new Map<Uint8Array, number>();

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
  let total = (freshMarkup.get(xmp.main) ?? markupOf(xmp.main)) + (xmp.extended ? markupOf(xmp.extended.data) : 0);
  for (const p of kept) total += markupOf(p);
  if (total > MAX_MARKUP_PER_FILE)
    throw new OutputTooLargeError(`The image's XMP would hold more markup than a file may (${MAX_MARKUP_PER_FILE} nodes) once rewritten.`);
}
