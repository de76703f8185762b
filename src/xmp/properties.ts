/**
 * Top-level XMP properties: the children and attributes of the node elements (rdf:Description or typed
 * nodes) directly under rdf:RDF. Properties are matched by namespace URI and local name, whatever
 * prefix a file binds; values are read from every RDF form (attribute, element text, rdf:resource,
 * rdf:value, rdf:Alt/Bag/Seq items).
 */
import type { Attr } from '@xmldom/xmldom';
import { NS_RDF, NS_XML, NS_XMLNS } from './namespaces.js';
import { type Document, type Element, elementChildren, ensureRdf, findRdf, ownText } from './packet.js';

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
  for (const owner of nodeElements(doc)) {
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
  return out;
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

/** Removes every top-level property the predicate accepts; returns how many went. */
export function removeProperties(doc: Document, match: PropertyMatch): number {
  const found = findProperties(doc, match);
  for (const ref of found) {
    if (ref.attr) ref.owner.removeAttributeNode(ref.attr);
    else removeWithIndent(ref.element!);
  }
  return found.length;
}

/** Removes an element and the white space that indented it, so repeated edits do not accumulate blank lines. */
function removeWithIndent(el: Element): void {
  const prev = el.previousSibling;
  if (prev && prev.nodeType === 3 && /^\s*$/.test(prev.nodeValue ?? '')) prev.parentNode?.removeChild(prev);
  el.parentNode?.removeChild(el);
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

/** Appends `child` to `parent` before its closing white space, indented like its siblings. */
function appendIndented(parent: Element, child: Element, fallbackIndent: string): void {
  const doc = parent.ownerDocument!;
  const last = parent.lastChild;
  const trailing = last && last.nodeType === 3 && /^\s*$/.test(last.nodeValue ?? '') ? last : null;
  let indent = fallbackIndent;
  for (let c = parent.firstChild; c; c = c.nextSibling) {
    if (c.nodeType === 3 && c !== trailing && /^\s+$/.test(c.nodeValue ?? '') && c.nextSibling?.nodeType === 1) {
      indent = c.nodeValue!;
      break;
    }
  }
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
 * a new rdf:Description per node element, so nothing of `other` is lost and nothing is duplicated.
 */
export function mergeProperties(base: Document, other: Document): void {
  const rdf = ensureRdf(base);
  if (!rdf) return;
  const have = new Set(findProperties(base, () => true).map((p) => `${p.namespaceURI} ${p.localName}`));
  for (const src of nodeElements(other)) {
    const rdfPrefix = rdf.prefix ?? 'rdf';
    const desc = base.createElementNS(NS_RDF, `${rdfPrefix}:Description`);
    desc.setAttributeNS(NS_RDF, `${rdfPrefix}:about`, src.getAttributeNS(NS_RDF, 'about') ?? '');
    let copied = 0;
    for (const ref of findProperties(other, () => true)) {
      if (ref.owner !== src) continue;
      const key = `${ref.namespaceURI} ${ref.localName}`;
      if (have.has(key)) continue;
      have.add(key);
      copied++;
      if (ref.attr) {
        const prefix = prefixFor(desc, ref.namespaceURI, ref.attr.prefix ?? 'ns');
        desc.setAttributeNS(ref.namespaceURI, `${prefix}:${ref.localName}`, ref.attr.value);
      } else {
        appendIndented(desc, base.importNode(ref.element!, true) as Element, '\n   ');
      }
    }
    if (copied > 0) appendIndented(rdf, desc, '\n  ');
  }
}
