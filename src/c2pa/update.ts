/**
 * What protect does to a file's Content Credentials (OPTMARK_C2PA, docs/c2pa.md):
 *
 * - update (default): the marked file gets a C2PA update manifest signed by the server, with the
 *   previous active manifest as its `parentOf` ingredient, a `cawg.training-mining` assertion that says
 *   what the written DataMining value says (the parent's other entries carried over), and a
 *   `c2pa.actions.v2` assertion recording the edit (`c2pa.opened` of the parent, then
 *   `c2pa.edited.metadata`). The input and the output are both validated by the reference reader, and
 *   the outcome says what it found: `updated` only when the input validated and the output does,
 *   `parent-invalid` when the input did not validate, `unverified` when validity hangs on checks that
 *   need a network; an output that fails where its input did not is never sent.
 * - refuse: 409 content_credentials_present; nothing is written.
 * - invalidate: the XMP is written as for any file; the old manifest's hard binding no longer matches
 *   (readers report assertion.dataHash.mismatch), and the answer says so.
 *
 * Files without a manifest store never reach this module. The builder and signer are c2pa-rs as wasm
 * (@contentauth/c2pa-wasm); they run only in the image workers.
 */
import type { Warning } from '../formats/complete.js';
import type { ParsedImage } from '../formats/index.js';
import type { DataMiningToken } from '../xmp/index.js';
import { coseSign1, reserveSizeFor } from './cose.js';
import type { C2paContainer } from './detect.js';
import type { SignerIdentity } from './identity.js';
import type { CredentialsOutcome } from './modes.js';
import { checkManifestStore } from './store-check.js';
import {
  activeTrainingEntries,
  type CredentialState,
  credentialState,
  describeFailures,
  loadC2pa,
  MIME,
  readerSettings,
  readStore,
  type StoreJson,
  type TrainingEntry,
} from './reader.js';

export const C2PA_UPDATED = 'content_credentials_updated';
export const C2PA_INVALIDATED = 'content_credentials_invalidated';
export const C2PA_PARENT_INVALID = 'content_credentials_parent_invalid';
export const C2PA_UNVERIFIED = 'content_credentials_unverified';

/** The software agent named in the claim and the action. */
export const CLAIM_GENERATOR = { name: 'optmark', version: '0.1.0' };

const CAWG_TRAINING = ['cawg.ai_training', 'cawg.ai_generative_training', 'cawg.data_mining'] as const;

/**
 * The training entries a DataMining value speaks for, and the use it gives them: the AI/ML training
 * values cover `ai_training` and `ai_generative_training` (the generative one only the latter), the
 * general prohibitions cover data mining too; the "see constraint / rights expression" values say
 * `constrained`. Values that prohibit nothing give no entry.
 */
export function trainingEntriesFor(token: DataMiningToken): Record<string, 'notAllowed' | 'constrained'> {
  const all = (use: 'notAllowed' | 'constrained') => Object.fromEntries(CAWG_TRAINING.map((e) => [e, use]));
  switch (token) {
    case 'DMI-PROHIBITED-AIMLTRAINING':
      return { 'cawg.ai_training': 'notAllowed', 'cawg.ai_generative_training': 'notAllowed' };
    case 'DMI-PROHIBITED-GENAIMLTRAINING':
      return { 'cawg.ai_generative_training': 'notAllowed' };
    case 'DMI-PROHIBITED':
    case 'DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING':
      return all('notAllowed');
    case 'DMI-PROHIBITED-SEECONSTRAINT':
    case 'DMI-PROHIBITED-SEEEMBEDDEDRIGHTSEXPR':
    case 'DMI-PROHIBITED-SEELINKEDRIGHTSEXPR':
      return all('constrained');
    default:
      return {};
  }
}

/** An entry name as CAWG spells it (`c2pa.ai_training` and a bare `ai_training` become `cawg.ai_training`). */
const cawgName = (name: string): string => `cawg.${name.replace(/^(c2pa|cawg)\./, '')}`;

/** The parent's entries carried over, then ours: ours win where both speak. */
function mergedEntries(parent: Record<string, TrainingEntry>, token: DataMiningToken): Record<string, TrainingEntry> {
  const out: Record<string, TrainingEntry> = {};
  for (const [name, entry] of Object.entries(parent)) if (entry && typeof entry === 'object') out[cawgName(name)] = entry;
  for (const [name, use] of Object.entries(trainingEntriesFor(token))) out[name] = { use };
  return out;
}

// c2pa-wasm reads a Blob through FileReaderSync, a browser worker API Node does not have. The blobs
// handed to it here are made from bytes we hold, so the "sync read" returns those bytes.
const blobBytes = new WeakMap<Blob, Uint8Array>();
export function blobOf(bytes: Uint8Array): Blob {
  const g = globalThis as { FileReaderSync?: unknown };
  g.FileReaderSync ??= class FileReaderSync {
    readAsArrayBuffer(blob: Blob): ArrayBuffer {
      const b = blobBytes.get(blob);
      if (!b) throw new Error('FileReaderSync: not a blob optmark made');
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    }
  };
  const blob = new Blob([bytes]);
  blobBytes.set(blob, bytes);
  return blob;
}

export interface UpdateInput {
  format: C2paContainer;
  /** The file as it came, with its manifest store (the parent ingredient). */
  original: Uint8Array;
  /** The structure of `original` when the caller holds it: its store is checked from it, without a walk. */
  originalImage?: ParsedImage | undefined;
  /** The file with the XMP written (its old store still in it: the builder replaces it). */
  marked: Uint8Array;
  token: DataMiningToken;
  /** What the marking changed (the recorded action): the metadata only, or the pixels too. */
  edit?: EditKind;
  identity: SignerIdentity;
}

/** `metadata`: the XMP was written (c2pa.edited.metadata); `pixels`: the fingerprint layer re-encoded the image too (c2pa.edited). */
export type EditKind = 'metadata' | 'pixels';

export interface Updated {
  bytes: Uint8Array;
  warning: Warning;
  outcome: Extract<CredentialsOutcome, 'updated' | 'parent-invalid' | 'unverified'>;
}

/** A string, Error or anything a wasm call threw, as text of bounded length. */
const why = (err: unknown): string => String((err as Error)?.message ?? err).slice(0, 200);

/** The builder could not make an update manifest; `parentValid` says whether there were valid credentials to lose. */
export class UpdateFailed extends Error {
  constructor(
    readonly reason: string,
    readonly parentValid: boolean,
  ) {
    super(reason);
    this.name = 'UpdateFailed';
  }
}

/** The reader's report of a store, validated; an unreadable one is an UpdateFailed saying `what`. */
async function validated(format: C2paContainer, bytes: Uint8Array, what: string, parentValid: boolean): Promise<StoreJson> {
  try {
    return await readStore(format, bytes);
  } catch (err) {
    throw new UpdateFailed(`${what} cannot be read: ${why(err)}`, parentValid);
  }
}

/**
 * The outcome and warning of an update manifest, from what the reader says of the input (`before`) and
 * of the output (`after`). Throws UpdateFailed when the output fails where the input did not: such a
 * file is never sent as `updated`.
 */
export function updateOutcome(before: CredentialState, after: CredentialState, signer: string, edit: EditKind = 'metadata'): Omit<Updated, 'bytes'> {
  const records =
    `an update manifest signed by "${signer}" records this ${edit === 'pixels' ? 'edit (fingerprint and metadata)' : 'metadata edit'}, ` +
    'with the previous manifest as its parent ingredient';
  if (before.kind === 'invalid') {
    const now =
      after.kind === 'valid'
        ? "The new manifest validates; the parent's failures stay on record in its ingredient, and the file's earlier history is not vouched for."
        : `The credentials still do not validate (${describeFailures(after)}).`;
    return {
      outcome: 'parent-invalid',
      warning: {
        code: C2PA_PARENT_INVALID,
        message: `The image's Content Credentials did not validate when it came (${describeFailures(before)}): ${records}. ${now}`,
      },
    };
  }
  if (after.kind === 'invalid') throw new UpdateFailed(`the updated credentials do not validate (${describeFailures(after)})`, true);
  if (after.kind === 'offline' || before.kind === 'offline') {
    const s = after.kind === 'offline' ? after : before;
    return {
      outcome: 'unverified',
      warning: {
        code: C2PA_UNVERIFIED,
        message:
          `The image's Content Credentials were carried over: ${records}. They validate here except for checks that need a network, which this server does not make ` +
          `(${describeFailures(s)}): whether they are valid depends on a reader that makes them.`,
      },
    };
  }
  const untrusted = after.untrusted.length > 0 ? after.untrusted.join(', ') : 'signingCredential.untrusted';
  return {
    outcome: 'updated',
    warning: {
      code: C2PA_UPDATED,
      message:
        `The image's Content Credentials were kept: ${records}. The reference reader validates the result (offline: no OCSP, remote manifest or DID lookups); ` +
        `readers that do not trust this signer report it as untrusted (${untrusted}) while the credentials stay valid.`,
    },
  };
}

/**
 * The marked file with an update manifest signed by `identity`, and what the reader says of it. Throws
 * UpdateFailed when the builder cannot make one, or makes one that fails where the input did not.
 */
export async function addUpdateManifest(input: UpdateInput): Promise<Updated> {
  const _m = await loadC2pa();
  const mime = MIME[input.format];
  // Lengths the store cannot hold are refused (422) before the reader reserves memory for them.
  checkManifestStore(input.originalImage ?? input.original);
  // A store the reference reader cannot read holds no credentials that could be kept.
  const inputStore = await validated(input.format, input.original, 'the manifest store', false);
  const before = credentialState(inputStore);
  const parentValid = before.kind !== 'invalid';
  const definition = {
    claim_generator_info: [CLAIM_GENERATOR],
    format: mime,
    assertions: [{ label: 'cawg.training-mining', data: { entries: mergedEntries(activeTrainingEntries(inputStore), input.token) } }],
  };
  const { identity } = input;
  let signed: Uint8Array;
  try {
    signed = await signEdit(definition, input.format, input, `XMP: IPTC PLUS DataMining set to ${input.token}`, identity);
  } catch (err) {
    throw new UpdateFailed(why(err), parentValid);
  }
  // The output is read as verify reads it: the outcome says what a reader finds, not what was meant.
  const after = credentialState(await validated(input.format, signed, 'the updated manifest store', parentValid));
  return { bytes: signed, ...updateOutcome(before, after, identity.subject, input.edit) };
}

/** The warning of a store that could not be updated and held no valid credentials (unreadable, or already broken). */
export function notUpdatedWarning(reason: string, edit: EditKind = 'metadata'): Warning {
  const what = edit === 'pixels' ? 'the image was marked and the re-encode did not keep the store' : 'the XMP was written and the store was left as it was';
  return {
    code: C2PA_INVALIDATED,
    message: `The image carried a C2PA manifest store that did not validate and could not be updated (${reason}); ${what}.`,
  };
}

/** invalidate with the fingerprint layer: the re-encode leaves the manifest store out altogether. */
export const REMOVED_WARNING: Warning = {
  code: C2PA_INVALIDATED,
  message:
    'The image carried Content Credentials; the fingerprint layer re-encodes the image, which leaves the manifest store out, and no update manifest was added (OPTMARK_C2PA=invalidate).',
};

export const INVALIDATED_WARNING: Warning = {
  code: C2PA_INVALIDATED,
  message:
    'The image carried Content Credentials; the metadata edit breaks their hard binding (readers report assertion.dataHash.mismatch) and no update manifest was added (OPTMARK_C2PA=invalidate).',
};

/**
 * The manifest `definition` built and signed by `identity` over `marked`, as an edit of `original` (its
 * parent ingredient) with the action the edit was: new manifests (create.ts) and update manifests alike.
 * `written` says what the XMP edit wrote; throws what the builder throws.
 */
export async function signEdit(
  definition: object,
  format: C2paContainer,
  input: { original: Uint8Array; marked: Uint8Array; edit?: EditKind | undefined },
  written: string,
  identity: SignerIdentity,
): Promise<Uint8Array> {
  const m = await loadC2pa();
  const mime = MIME[format];
  const reserveSize = reserveSizeFor(identity);
  const builder = m.WasmBuilder.fromJson(JSON.stringify(definition), readerSettings());
  try {
    // 'edit': the builder records c2pa.opened of the parent ingredient first, as C2PA 2 requires of a
    // manifest that does not create the asset; optmark did not create the image, it edited it.
    builder.setIntent('edit');
    await builder.addIngredientFromBlob(JSON.stringify({ relationship: 'parentOf', title: 'input' }), mime, blobOf(input.original));
    builder.addAction(
      input.edit === 'pixels'
        ? { action: 'c2pa.edited', softwareAgent: CLAIM_GENERATOR, description: `Pixels: an invisible fingerprint added (the image re-encoded); ${written}` }
        : { action: 'c2pa.edited.metadata', softwareAgent: CLAIM_GENERATOR, description: written },
    );
    const signer = { alg: identity.alg, reserveSize, sign: async (claim: Uint8Array) => new Uint8Array(coseSign1(identity, claim, reserveSize)) };
    return await builder.sign(signer as Parameters<typeof builder.sign>[0], [], mime, blobOf(input.marked));
  } finally {
    builder.free();
  }
}
