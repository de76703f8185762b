/**
 * Content Credentials for a file that has none (the `--content-credentials` layer, docs/signals.md): a
 * new C2PA manifest signed with the server's C2PA identity (src/c2pa/identity.ts), carrying a
 * `cawg.training-mining` assertion (CAWG Training and Data Mining assertion: each entry `notAllowed`
 * unless configured otherwise) and a `c2pa.actions.v2` assertion: `c2pa.opened` of the file as it came
 * (its parentOf ingredient, without credentials of its own), then the edit optmark made. Files that
 * already carry a manifest store get the update manifest instead (src/c2pa/update.ts).
 *
 * The hard binding covers every byte outside the manifest store, so this is the last thing done to a
 * file: a later edit of the XMP or the pixels would break it.
 */
import { coseSign1, reserveSizeFor } from './cose.js';
import type { C2paContainer } from './detect.js';
import type { SignerIdentity } from './identity.js';
import { CAWG_ENTRIES, type TrainingMining } from '../signals/training.js';
import { loadC2pa, MIME, readerSettings } from './reader.js';
import { blobOf, CLAIM_GENERATOR, type EditKind } from './update.js';

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
  const m = await loadC2pa();
  const mime = MIME[input.format];
  const definition = {
    claim_generator_info: [CLAIM_GENERATOR],
    format: mime,
    assertions: [{ label: 'cawg.training-mining', data: { entries: Object.fromEntries(CAWG_ENTRIES.map((e) => [e, { use: input.training[e] }])) } }],
  };
  const { identity } = input;
  const reserveSize = reserveSizeFor(identity);
  const builder = m.WasmBuilder.fromJson(JSON.stringify(definition), readerSettings());
  try {
    // 'edit': the builder records c2pa.opened of the parent ingredient first, as C2PA 2 requires of a
    // manifest that does not create the asset; optmark did not create the image, it edited it.
    builder.setIntent('edit');
    await builder.addIngredientFromBlob(JSON.stringify({ relationship: 'parentOf', title: 'input' }), mime, blobOf(input.original));
    builder.addAction(
      input.edit === 'pixels'
        ? {
            action: 'c2pa.edited',
            softwareAgent: CLAIM_GENERATOR,
            description: `Pixels: an invisible fingerprint added (the image re-encoded); ${input.written}`,
          }
        : { action: 'c2pa.edited.metadata', softwareAgent: CLAIM_GENERATOR, description: input.written },
    );
    const signer = { alg: identity.alg, reserveSize, sign: async (claim: Uint8Array) => new Uint8Array(coseSign1(identity, claim, reserveSize)) };
    return await builder.sign(signer as Parameters<typeof builder.sign>[0], [], mime, blobOf(input.marked));
  } finally {
    builder.free();
  }
}
