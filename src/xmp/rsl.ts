/**
 * An RSL 1.0 licence embedded in XMP (rslstandard.org/guide/file-embedding: the `rsl` namespace declared
 * on rdf:RDF, the licence in an rdf:Description): `<rsl:rsl><rsl:content url=...><rsl:license>` with
 * `<rsl:permits type="usage">` and `<rsl:prohibits type="usage">`, each a comma-separated list of usage
 * tokens (rslstandard.org/rsl: `all`, `ai-all`, `ai-train`, `ai-input`, `ai-index`, `search`).
 *
 * AI training is reserved by a licence when a `prohibits type="usage"` names `ai-train`, `ai-all` or
 * `all`, or when a `permits type="usage"` lists usages and none of those three (the specification: uses
 * a licence does not permit are not granted). The element form is what the guide shows; the licence is
 * found wherever it sits in a packet, whichever prefix binds the namespace.
 */
import { NS_RSL } from './namespaces.js';
import type { Document, Element } from './packet.js';

/** The usage tokens that cover AI training. */
const TRAINING = new Set(['ai-train', 'ai-all', 'all']);

/** Past this many RSL elements in one packet the rest are not looked at (a packet is bounded already). */
const MAX_RSL_ELEMENTS = 1000;

export interface RslReading {
  /** Some embedded RSL licence reserves AI training. */
  prohibitsTraining: boolean;
}

function tokens(el: Element): string[] {
  return (el.textContent ?? '')
    .split(/[\s,]+/)
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
}

function isUsage(el: Element): boolean {
  const type = el.getAttribute('type') ?? el.getAttributeNS(NS_RSL, 'type');
  return (type ?? 'usage').trim().toLowerCase() === 'usage';
}

/** Whether any licence in `docs` reserves AI training. */
export function readRsl(docs: readonly Document[]): RslReading {
  for (const doc of docs) {
    let seen = 0;
    for (const local of ['prohibits', 'permits'] as const) {
      const list = doc.getElementsByTagNameNS(NS_RSL, local);
      for (let i = 0; i < list.length && seen < MAX_RSL_ELEMENTS; i++, seen++) {
        const el = list.item(i)!;
        if (!isUsage(el)) continue;
        const named = tokens(el).some((t) => TRAINING.has(t));
        if (local === 'prohibits' ? named : !named && tokens(el).length > 0) return { prohibitsTraining: true };
      }
    }
  }
  return { prohibitsTraining: false };
}
