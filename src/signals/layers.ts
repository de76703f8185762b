/**
 * The two signal layers of the layer path (`optmark mark --tdmrep --content-credentials`, the
 * dashboard; never POST /api/v1/protect), beside the IPTC field (docs/signals.md):
 *
 * - TDMRep: `tdm:reservation` 1 and, when configured, `tdm:policy` in the XMP (W3C TDM Reservation
 *   Protocol, namespace http://www.w3.org/ns/tdmrep/), written in the same merge as the opt-out field, so
 *   every other property of the file stays.
 * - Content Credentials: a new C2PA manifest (src/c2pa/create.ts) for a file that has none.
 *
 * The order on the layer path (src/pipeline/mark.ts), each step leaving the earlier ones valid:
 * 1. the fingerprint re-encodes the pixels;
 * 2. the XMP fields (the opt-out field, TDMRep) are written;
 * 3. the provenance tag signs the content outside the XMP (and outside a manifest store);
 * 4. the C2PA manifest's hard binding covers every byte but the store itself: it comes last.
 */
import type { C2paContainer } from '../c2pa/detect.js';
import type { SignerIdentity } from '../c2pa/identity.js';
import type { EditKind } from '../c2pa/update.js';
import type { Document } from '../xmp/index.js';
import { NS_TDMREP } from '../xmp/namespaces.js';
import { setSimpleProperty } from '../xmp/properties.js';
import type { TrainingMining } from './training.js';

export const LAYER_TDMREP = 'tdmrep';
export const LAYER_CONTENT_CREDENTIALS = 'content-credentials';

/** The signal layers asked for, and their settings. */
export interface SignalLayers {
  tdmrep: boolean;
  /** tdm:policy (OPTMARK_TDM_POLICY or --tdm-policy); without it the reservation is written alone. */
  tdmPolicy?: string | undefined;
  contentCredentials: boolean;
  /** The uses the new manifest's cawg.training-mining entries state (OPTMARK_C2PA_TRAINING_MINING). */
  training: TrainingMining;
}

/** Sets tdm:reservation to 1 and, when given, tdm:policy (a policy already in the file stays when none is given). */
export function setTdmRep(doc: Document, policy: string | undefined): void {
  if (!setSimpleProperty(doc, NS_TDMREP, 'tdm', 'reservation', '1')) throw new Error('XMP document has no place for properties');
  if (policy !== undefined) setSimpleProperty(doc, NS_TDMREP, 'tdm', 'policy', policy);
}

/** The XMP edit of the TDMRep layer, or undefined when it is off. */
export function tdmrepEdit(layers: SignalLayers | undefined): ((doc: Document) => void) | undefined {
  if (!layers?.tdmrep) return undefined;
  const policy = layers.tdmPolicy;
  return (doc) => setTdmRep(doc, policy);
}

/** What the XMP now says, as the manifest's action records it. */
function written(token: string, layers: SignalLayers, provenance: boolean): string {
  const parts = [`IPTC PLUS DataMining set to ${token}`];
  if (layers.tdmrep) parts.push(`TDMRep tdm:reservation 1${layers.tdmPolicy ? ` with tdm:policy ${layers.tdmPolicy}` : ''}`);
  if (provenance) parts.push('an optmark provenance tag');
  return `XMP: ${parts.join('; ')}`;
}

export interface CredentialsLayerInput {
  format: C2paContainer;
  /** The file as it came (no manifest store). */
  original: Uint8Array;
  /** The file after the other layers. */
  marked: Uint8Array;
  token: string;
  edit: EditKind;
  provenance: boolean;
  layers: SignalLayers;
  identity: SignerIdentity;
}

/** The marked file with a new signed manifest (step 4 above); throws what the builder throws. */
export async function addContentCredentials(input: CredentialsLayerInput): Promise<Uint8Array> {
  const { addNewManifest } = await import('../c2pa/create.js');
  return addNewManifest({
    format: input.format,
    original: input.original,
    marked: input.marked,
    edit: input.edit,
    written: written(input.token, input.layers, input.provenance),
    training: input.layers.training,
    identity: input.identity,
  });
}
