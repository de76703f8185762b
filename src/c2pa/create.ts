import type { C2paContainer } from './detect.js';
import type { SignerIdentity } from './identity.js';
import { CAWG_ENTRIES, type TrainingMining } from '../signals/training.js';
import { MIME } from './reader.js';
import { CLAIM_GENERATOR, type EditKind, signEdit } from './update.js';

export interface CreateInput {
  format: C2paContainer;
  /** The file as it came (recorded as the parent ingredient; it has no manifest store). */
  original: Uint8Array;
  /** The marked file the manifest is bound to. */
  marked: Uint8Array;
  /** What the marking changed (the recorded action). */
  edit: EditKind;
  /** What the recorded action's description says was written besides the pixels. */
  written: string;
  training: TrainingMining;
  identity: SignerIdentity;
}

/** The marked file with a new manifest store holding one manifest signed by `identity`; throws what the builder throws. */
export async function addNewManifest(input: CreateInput): Promise<Uint8Array> {
  const mime = MIME[input.format];
  const definition = {
    claim_generator_info: [CLAIM_GENERATOR],
    format: mime,
    assertions: [{ label: 'cawg.training-mining', data: { entries: Object.fromEntries(CAWG_ENTRIES.map((e) => [e, { use: input.training[e] }])) } }],
  };
  return signEdit(definition, input.format, input, input.written, input.identity);
}
