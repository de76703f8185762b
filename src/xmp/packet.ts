/**
 * XMP packets as namespace-aware DOM documents (@xmldom/xmldom). Parsing is strict about what could
 * hurt: xmldom never expands an entity a DTD declares nor fetches an external one (a reference stays
 * literal text, as ExifTool shows it), and the DTD itself is dropped from the document, so it is never
 * written back; nesting depth is bounded so no later walk can overflow the stack.
 */
import { createRequire } from 'node:module';
import type { Attr, Document, Element, Node } from '@xmldom/xmldom';
import { LimitExceededError } from '../errors.js';
import { NS_RDF, NS_X, NS_XMLNS } from './namespaces.js';

export type { Attr, Document, Element, Node };

export const ELEMENT_NODE = 1;
export const TEXT_NODE = 3;
export const CDATA_SECTION_NODE = 4;
export const PROCESSING_INSTRUCTION_NODE = 7;

/** Packets larger than this are not parsed (containers already bound what they hand over). */
export const MAX_PACKET_BYTES = 16 * 1024 * 1024;
/**
 * Markup one file's packets may hold together, counted as '<' characters (a bound on elements, PIs and
 * comments) plus attribute assignments (`=` before a quote: attributes and namespace declarations, which
 * cost xmldom as much as elements). xmldom spends 10-20 µs and 1-2 KB of heap per node on a quiet
 * machine (more on a busy one), so this keeps parsing a crafted file under a second and its DOM near
 * 100 MB, also with both image workers on one at once. 300,000 '<' alone let a 2 MB upload of empty
 * elements take 8-12 s and 330 MB, and one element with 200,000 attributes was not bounded at all. Real
 * packets stay well below: a bloated Photoshop DocumentAncestors list of 20,000 entries is 40,000.
 */
export const MAX_MARKUP_PER_FILE = 50_000;

/** What is left of a file's markup allowance; one per file, shared by all its packets. */
export interface MarkupBudget {
  remaining: number;
}

export const markupBudget = (): MarkupBudget => ({ remaining: MAX_MARKUP_PER_FILE });

/** Deeper nesting than any real XMP needs; beyond it a packet is treated as unreadable. */
const MAX_DEPTH = 200;

const PACKET_BEGIN = 'begin="\uFEFF" id="W5M0MpCehiHzreSzNTczkc9d"';
const PACKET_END = 'end="w"';

type Xmldom = typeof import('@xmldom/xmldom');
let xmldom: Xmldom | undefined;

/**
 * xmldom, loaded on first use: compiling it costs a process about 70 ms of CPU, which marking a folder
 * of files without XMP (the fresh packet is prebuilt text) never needs.
 */
function dom(): Xmldom {
  return (xmldom ??= createRequire(import.meta.url)('@xmldom/xmldom') as Xmldom);
}

/** Loads the XML library now: a server's image worker does it at start, so no request pays for it. */
export function loadXml(): void {
  dom();
}

const utf8 = new TextDecoder('utf-8');
const utf16le = new TextDecoder('utf-16le');
const utf16be = new TextDecoder('utf-16be');

/**
 * Packets may be UTF-8, UTF-16 or UTF-32, either byte order (XMP part 1, 7.3.2); the encoding shows in
 * the first bytes, which are '<' or a byte-order mark. We always write UTF-8.
 */
function decodePacket(b: Uint8Array): string {
  const [b0, b1, b2, b3] = [b[0], b[1], b[2], b[3]];
  if (b0 === 0 && b1 === 0 && ((b2 === 0 && b3 === 0x3c) || (b2 === 0xfe && b3 === 0xff))) return utf32(b, false);
  if (b2 === 0 && b3 === 0 && ((b0 === 0x3c && b1 === 0) || (b0 === 0xff && b1 === 0xfe))) return utf32(b, true);
  if ((b0 === 0 && b1 === 0x3c) || (b0 === 0xfe && b1 === 0xff)) return utf16be.decode(b);
  if ((b0 === 0x3c && b1 === 0) || (b0 === 0xff && b1 === 0xfe)) return utf16le.decode(b);
  return utf8.decode(b);
}

function utf32(b: Uint8Array, littleEndian: boolean): string {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength - (b.byteLength % 4));
  const parts: string[] = [];
  for (let i = 0; i < dv.byteLength; i += 4) {
    const cp = dv.getUint32(i, littleEndian);
    parts.push(cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) ? String.fromCodePoint(cp) : '\uFFFD');
  }
  const text = parts.join('');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function depthWithin(root: Node, limit: number): boolean {
  const stack: Array<[Node, number]> = [[root, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > limit) return false;
    for (let c = node.firstChild; c; c = c.nextSibling) if (c.nodeType === ELEMENT_NODE) stack.push([c, depth + 1]);
  }
  return true;
}

/**
 * Parses one packet's bytes. Returns undefined when it is not well-formed XML or nests absurdly deep:
 * such a packet cannot be read, and callers decide what that means. A DTD does not make a packet
 * unreadable (XMP forbids DTDs, yet refusing the packet would lose a plainly written opt-out and every
 * other property on protect); it is removed, unexpanded.
 */
export function parsePacket(bytes: Uint8Array, budget: MarkupBudget = markupBudget()): Document | undefined {
  if (bytes.length > MAX_PACKET_BYTES) throw new LimitExceededError('XMP packet too large');
  // The decoders drop a leading BOM; writers that pad packets with NULs get those trimmed.
  let text = decodePacket(bytes);
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0) end--;
  if (end !== text.length) text = text.slice(0, end);
  budget.remaining -= countMarkup(text);
  if (budget.remaining < 0) throw new LimitExceededError('XMP holds more markup than the processing limit');
  let fatal = false;
  const parser = new (dom().DOMParser)({
    locator: false,
    onError: (level) => {
      if (level === 'fatalError') fatal = true;
    },
  });
  let doc: Document;
  try {
    doc = parser.parseFromString(text, 'text/xml');
  } catch {
    return undefined;
  }
  if (fatal || !doc.documentElement) return undefined;
  if (!depthWithin(doc, MAX_DEPTH)) return undefined;
  dropProlog(doc);
  return doc;
}

function countMarkup(text: string): number {
  let n = 0;
  for (let at = text.indexOf('<'); at >= 0; at = text.indexOf('<', at + 1)) n++;
  for (let at = text.indexOf('='); at >= 0; at = text.indexOf('=', at + 1)) {
    let next = at + 1;
    while (isXmlSpace(text.charCodeAt(next))) next++;
    const c = text.charCodeAt(next);
    if (c === 0x22 || c === 0x27) n++;
  }
  return n;
}

const isXmlSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** The markup a packet's bytes hold, counted as parsePacket charges it to a file's budget. */
export function markupOf(bytes: Uint8Array): number {
  return countMarkup(decodePacket(bytes));
}

/**
 * Removes the DTD and the XML declaration: we write UTF-8 packets that open with `<?xpacket`, where a
 * declaration (maybe naming UTF-16) would be both wrong and, after the xpacket PI, not well-formed.
 */
function dropProlog(doc: Document): void {
  for (let n = doc.firstChild; n; ) {
    const next = n.nextSibling;
    if (n === doc.doctype || (n.nodeType === PROCESSING_INSTRUCTION_NODE && n.nodeName.toLowerCase() === 'xml')) doc.removeChild(n);
    n = next;
  }
}

let xmlSerializer: InstanceType<Xmldom['XMLSerializer']> | undefined;
const serializer = (): InstanceType<Xmldom['XMLSerializer']> => (xmlSerializer ??= new (dom().XMLSerializer)());

/** Serialises a document as a complete XMP packet, adding the xpacket wrapper when it lacks one. */
export function serializePacket(doc: Document): string {
  const body = serializer().serializeToString(doc);
  const first = doc.firstChild;
  const last = doc.lastChild;
  const hasBegin = first?.nodeType === PROCESSING_INSTRUCTION_NODE && first.nodeName === 'xpacket';
  const hasEnd = last?.nodeType === PROCESSING_INSTRUCTION_NODE && last.nodeName === 'xpacket';
  return `${hasBegin ? '' : `<?xpacket ${PACKET_BEGIN}?>\n`}${body}${hasEnd ? '' : `\n<?xpacket ${PACKET_END}?>`}`;
}

/** Serialises without the xpacket wrapper (Extended XMP is a bare x:xmpmeta document). */
export function serializeBare(doc: Document): string {
  let out = '';
  for (let n = doc.firstChild; n; n = n.nextSibling) {
    if (n.nodeType === PROCESSING_INSTRUCTION_NODE && n.nodeName === 'xpacket') continue;
    out += serializer().serializeToString(n);
  }
  return out.trim();
}

export function serializeNode(node: Node): string {
  return serializer().serializeToString(node);
}

/** A fresh, empty packet: x:xmpmeta, rdf:RDF and one empty rdf:Description about "". */
export function emptyPacket(): Document {
  const text =
    `<?xpacket ${PACKET_BEGIN}?>\n` +
    `<x:xmpmeta xmlns:x="${NS_X}">\n` +
    ` <rdf:RDF xmlns:rdf="${NS_RDF}">\n` +
    `  <rdf:Description rdf:about=""/>\n` +
    ` </rdf:RDF>\n` +
    `</x:xmpmeta>\n` +
    `<?xpacket ${PACKET_END}?>`;
  return new (dom().DOMParser)().parseFromString(text, 'text/xml');
}

export function elementChildren(node: Node): Element[] {
  const out: Element[] = [];
  for (let c = node.firstChild; c; c = c.nextSibling) if (c.nodeType === ELEMENT_NODE) out.push(c as Element);
  return out;
}

/** The rdf:RDF element: the root itself, or the first one under x:xmpmeta (or x:xapmeta). */
export function findRdf(doc: Document): Element | undefined {
  const root = doc.documentElement;
  if (!root) return undefined;
  if (root.namespaceURI === NS_RDF && root.localName === 'RDF') return root;
  const stack: Element[] = [root];
  while (stack.length > 0) {
    const el = stack.pop()!;
    for (const c of elementChildren(el)) {
      if (c.namespaceURI === NS_RDF && c.localName === 'RDF') return c;
      stack.push(c);
    }
  }
  return undefined;
}

/** The rdf:RDF element, created under the root x:xmpmeta when missing; undefined when the root is not XMP. */
export function ensureRdf(doc: Document): Element | undefined {
  const found = findRdf(doc);
  if (found) return found;
  const root = doc.documentElement;
  if (!root || root.namespaceURI !== NS_X) return undefined;
  const rdf = doc.createElementNS(NS_RDF, 'rdf:RDF');
  rdf.setAttributeNS(NS_XMLNS, 'xmlns:rdf', NS_RDF);
  root.appendChild(rdf);
  return rdf;
}

/** The text content of an element's text and CDATA children (not descendants). */
export function ownText(el: Element): string {
  let out = '';
  for (let c = el.firstChild; c; c = c.nextSibling) {
    if (c.nodeType === TEXT_NODE || c.nodeType === CDATA_SECTION_NODE) out += c.nodeValue ?? '';
  }
  return out;
}
