/**
 * Top-level XMP properties: the children and attributes of the node elements (rdf:Description or typed
 * nodes) directly under rdf:RDF. Properties are matched by namespace URI and local name, whatever
 * prefix a file binds; values are read from every RDF form (attribute, element text, rdf:resource,
 * rdf:value, rdf:Alt/Bag/Seq items).
 */
import type { Attr } from '@xmldom/xmldom';
import { NS_RDF, NS_XML, NS_XMLNS } from './namespaces.js';
import { type Document, type Element, type Node, elementChildren, ensureRdf, findRdf, ownText } from './packet.js';

export type PropertyMatch = (namespaceURI: string, localName: string) => boolean;

export interface PropertyRef {
  /** The node element holding the property. */
  owner: Element;
  namespaceURI: string;
  localName: string;
  attr?: Attr;
  element?: Element;
}

function isPropertyAttr(a: Attr): boolean {
  const ns = a.namespaceURI;
  return !!ns && ns !== NS_RDF && ns !== NS_XML && ns !== NS_XMLNS;
}

function attrs(el: Element): Attr[] {
  const out: Attr[] = [];
  for (let i = 0; i < el.attributes.length; i++) out.push(el.attributes.item(i)!);
  return out;
}

/** Node elements under rdf:RDF (usually rdf:Description). */
export function nodeElements(doc: Document): Element[] {
  const rdf = findRdf(doc);
  return rdf ? elementChildren(rdf) : [];
}

/** Every top-level property the predicate accepts, in document order. */
export function findProperties(doc: Document, match: PropertyMatch): PropertyRef[] {
  const out: PropertyRef[] = [];
  for (const owner of nodeElements(doc)) propertiesOf(owner, match, out);
  return out;
}

/** The properties of one node element the predicate accepts: its attributes, then its elements. */
function propertiesOf(owner: Element, match: PropertyMatch, out: PropertyRef[]): void {
  for (const a of attrs(owner)) {
    if (isPropertyAttr(a) && match(a.namespaceURI!, a.localName!)) {
      out.push({ owner, namespaceURI: a.namespaceURI!, localName: a.localName!, attr: a });
    }
  }
  for (const el of elementChildren(owner)) {
    if (el.namespaceURI && match(el.namespaceURI, el.localName!)) {
      out.push({ owner, namespaceURI: el.namespaceURI, localName: el.localName!, element: el });
    }
  }
}

function rdfAttr(el: Element, local: string): string | null {
  return el.getAttributeNS(NS_RDF, local) || null;
}

function isRdf(el: Element, local: string): boolean {
  return el.namespaceURI === NS_RDF && el.localName === local;
}

/** The values a property carries, trimmed, in whichever RDF form it is written. */
export function valuesOf(ref: PropertyRef): string[] {
  if (ref.attr) return [ref.attr.value.trim()];
  const el = ref.element!;
  const resource = rdfAttr(el, 'resource');
  if (resource !== null) return [resource.trim()];
  const value = rdfAttr(el, 'value');
  if (value !== null) return [value.trim()];
  const kids = elementChildren(el);
  if (kids.length === 0) {
    const text = ownText(el).trim();
    return text ? [text] : [];
  }
  const out: string[] = [];
  for (const k of kids) {
    if (isRdf(k, 'value')) out.push(ownText(k).trim());
    else if (isRdf(k, 'Alt') || isRdf(k, 'Bag') || isRdf(k, 'Seq')) {
      for (const li of elementChildren(k)) {
        if (!isRdf(li, 'li')) continue;
        const r = rdfAttr(li, 'resource');
        out.push((r ?? ownText(li)).trim());
      }
    } else if (isRdf(k, 'Description')) {
      const v = rdfAttr(k, 'value');
      if (v !== null) out.push(v.trim());
      for (const vv of elementChildren(k)) if (isRdf(vv, 'value')) out.push(ownText(vv).trim());
    }
  }
  return out.filter((v) => v.length > 0);
}

/**
 * The value of a property written in a simple form (an attribute, rdf:resource, or element text with no
 * child element), exactly as written, white space included; undefined for every other form.
 */
export function simpleValueOf(ref: PropertyRef): string | undefined {
  if (ref.attr) return ref.attr.value;
  const el = ref.element!;
  const resource = rdfAttr(el, 'resource');
  if (resource !== null) return resource;
  if (rdfAttr(el, 'value') !== null || elementChildren(el).length > 0) return undefined;
  return ownText(el);
}

/** Removes every top-level property the predicate accepts; returns how many went. */
export function removeProperties(doc: Document, match: PropertyMatch): number {
  const found = findProperties(doc, match);
  removePropertyRefs(found);
  return found.length;
}

/**
 * xmldom re-indexes a parent's childNodes on every removal and every insertion that is not an append,
 * so removing k of n children one by one costs O(k*n): minutes for a crafted packet with 100k
 * properties. Past this many removals from one parent, the parent is rebuilt once instead.
 */
const REBUILD_AFTER = 16;

const isBlank = (n: Node | null): n is Node => !!n && n.nodeType === 3 && /^\s*$/.test(n.nodeValue ?? '');

/**
 * Removes the properties (found by findProperties, so top-level), element ones with the white space
 * that indented them, so repeated edits do not accumulate blank lines. Other PropertyRefs into the
 * same node elements may go stale: look them up again afterwards.
 */
export function removePropertyRefs(refs: readonly PropertyRef[]): void {
  const byOwner = new Map<Element, Set<Node>>();
  for (const ref of refs) {
    if (ref.attr) {
      ref.owner.removeAttributeNode(ref.attr);
      continue;
    }
    const el = ref.element!;
    let drop = byOwner.get(ref.owner);
    if (!drop) byOwner.set(ref.owner, (drop = new Set()));
    drop.add(el);
    if (isBlank(el.previousSibling)) drop.add(el.previousSibling);
  }
  for (const [owner, drop] of byOwner) {
    if (drop.size <= REBUILD_AFTER) {
      for (const n of drop) owner.removeChild(n);
      continue;
    }
    // Deep clones appended to a detached element: each append is O(1), and one replaceChild swaps it in.
    const fresh = owner.cloneNode(false) as Element;
    for (let c = owner.firstChild; c; c = c.nextSibling) if (!drop.has(c)) fresh.appendChild(c.cloneNode(true));
    owner.parentNode!.replaceChild(fresh, owner);
  }
}

/** A simple property written as an attribute, as the equivalent element (RDF allows either form). */
export function attrAsElement(doc: Document, attr: Attr): Element {
  const el = doc.createElementNS(attr.namespaceURI, attr.name);
  el.appendChild(doc.createTextNode(attr.value));
  return el;
}

/** The prefix bound to `ns` in scope at `el`, declaring one (preferring `preferred`) when none is. */
function prefixFor(el: Element, ns: string, preferred: string): string {
  const bound = el.lookupPrefix(ns);
  if (bound) return bound;
  let prefix = preferred;
  for (let n = 1; el.lookupNamespaceURI(prefix) !== null; n++) prefix = `${preferred}${n}`;
  el.setAttributeNS(NS_XMLNS, `xmlns:${prefix}`, ns);
  return prefix;
}

/** The first rdf:Description about the resource, created when there is none. */
function mainDescription(doc: Document): Element | undefined {
  const rdf = ensureRdf(doc);
  if (!rdf) return undefined;
  const found = elementChildren(rdf).find((el) => isRdf(el, 'Description'));
  if (found) return found;
  const rdfPrefix = rdf.prefix ?? 'rdf';
  const desc = doc.createElementNS(NS_RDF, `${rdfPrefix}:Description`);
  desc.setAttributeNS(NS_RDF, `${rdfPrefix}:about`, '');
  appendIndented(rdf, desc, '\n  ');
  return desc;
}

/**
 * Appends `child` to `parent` before its closing white space, indented like the last element child
 * (looked up from the end, so that appending stays O(1) in a parent with many children).
 */
function appendIndented(parent: Element, child: Element, fallbackIndent: string): void {
  const doc = parent.ownerDocument!;
  const last = parent.lastChild;
  const trailing = isBlank(last) ? last : null;
  let indent = fallbackIndent;
  const lastElement = trailing ? trailing.previousSibling : last;
  const before = lastElement?.nodeType === 1 ? lastElement.previousSibling : null;
  if (isBlank(before) && before.nodeValue) indent = before.nodeValue;
  const closing = trailing ? null : doc.createTextNode(indent.replace(/ {1,2}$/, ''));
  parent.insertBefore(doc.createTextNode(indent), trailing);
  parent.insertBefore(child, trailing);
  if (closing) parent.appendChild(closing);
}

/**
 * Sets a simple top-level property as element text (ExifTool's form) on the main rdf:Description,
 * after removing every existing occurrence. Returns false when the document has no place for XMP.
 */
export function setSimpleProperty(doc: Document, ns: string, preferredPrefix: string, localName: string, value: string, alsoRemove?: PropertyMatch): boolean {
  removeProperties(doc, (n, l) => (n === ns && l === localName) || (alsoRemove?.(n, l) ?? false));
  const desc = mainDescription(doc);
  if (!desc) return false;
  const prefix = prefixFor(desc, ns, preferredPrefix);
  const el = doc.createElementNS(ns, `${prefix}:${localName}`);
  el.appendChild(doc.createTextNode(value));
  appendIndented(desc, el, '\n   ');
  return true;
}

/**
 * Copies into `base` the top-level properties of `other` that `base` lacks (by namespace and name), in
 * one new rdf:Description (all node elements of a packet describe the same resource), so nothing of
 * `other` is lost and nothing is duplicated. Linear in the size of both documents.
 */
export function mergeProperties(base: Document, other: Document): void {
  const rdf = ensureRdf(base);
  if (!rdf) return;
  const have = new Set(findProperties(base, () => true).map((p) => `${p.namespaceURI} ${p.localName}`));
  const sources = nodeElements(other);
  const rdfPrefix = rdf.prefix ?? 'rdf';
  const desc = base.createElementNS(NS_RDF, `${rdfPrefix}:Description`);
  desc.setAttributeNS(NS_RDF, `${rdfPrefix}:about`, sources[0]?.getAttributeNS(NS_RDF, 'about') ?? '');
  const elements: Element[] = [];
  for (const src of sources) {
    const refs: PropertyRef[] = [];
    propertiesOf(src, () => true, refs);
    for (const ref of refs) {
      const key = `${ref.namespaceURI} ${ref.localName}`;
      if (have.has(key)) continue;
      have.add(key);
      // Attribute properties become elements: xmldom's attribute and prefix lookups are linear scans,
      // so copying thousands of attributes would be quadratic; the serializer declares each namespace.
      elements.push(ref.attr ? attrAsElement(base, ref.attr) : (base.importNode(ref.element!, true) as Element));
    }
  }
  if (elements.length === 0) return;
  // Built by appends only (O(1) each in xmldom), laid out as appendIndented would lay it out.
  for (const el of elements) {
    desc.appendChild(base.createTextNode('\n   '));
    desc.appendChild(el);
  }
  desc.appendChild(base.createTextNode('\n '));
  appendIndented(rdf, desc, '\n  ');
}
