/**
 * Reading and validating Content Credentials with the reference implementation (c2pa-rs built to
 * wasm: @contentauth/c2pa-wasm). The wasm module (about 9 MB, ~1.4 s and ~70 MB RSS to instantiate)
 * is loaded lazily, on the first file that carries a manifest store, in the process that asks: the
 * service asks only in its image workers (verify runs there), never on the event loop.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Warning } from '../formats/complete.js';
import { FORMATS, type ParsedImage } from '../formats/index.js';
import type { C2paContainer } from './detect.js';
import { checkManifestStore, MalformedStoreError } from './store-check.js';

export type TrainingUse = 'notAllowed' | 'constrained' | 'allowed';

export interface C2paReport {
  /** A manifest store is present where the container puts one. */
  present: boolean;
  /** The manifest store validates (the reader's validation_state is Valid or Trusted). */
  valid: boolean;
  /** Strictest `use` among the training entries of the active manifest's training-mining assertion, or null. */
  trainingMining: TrainingUse | null;
}

export interface C2paReading {
  c2pa: C2paReport;
  warnings: Warning[];
}

export const SIGNAL_C2PA_TRAINING = 'c2pa.trainingMining';
export const C2PA_UNREADABLE = 'content_credentials_unreadable';
export const C2PA_INVALID = 'content_credentials_invalid';

const ABSENT: C2paReport = Object.freeze({ present: false, valid: false, trainingMining: null }) as C2paReport;
export const MIME: Record<C2paContainer, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp' };
const RANK: Record<TrainingUse, number> = { allowed: 1, constrained: 2, notAllowed: 3 };
/** Labels of the training-and-data-mining assertion: C2PA 1.x and CAWG (with or without a version suffix). */
const TRAINING_LABEL = /^(c2pa|cawg)\.training-mining(\.v\d+)?$/;
/** Entries about training and mining (ai_training, ai_generative_training, data_mining, prefixed c2pa./cawg. or not); ai_inference is not one. */
const TRAINING_ENTRY = /(^|\.)(ai_training|ai_generative_training|data_mining)$/;

type Wasm = typeof import('@contentauth/c2pa-wasm');
let wasm: Promise<Wasm> | undefined;
/** The module's linear memory, once instantiated: it grows as the reader needs and never shrinks. */
let wasmMemory: { buffer: ArrayBuffer } | undefined;

/** The wasm reader, instantiated once per thread on first use. */
export function loadC2pa(): Promise<Wasm> {
  wasm ??= (async () => {
    const m = await import('@contentauth/c2pa-wasm');
    const require = createRequire(import.meta.url);
    const exports = await m.default({ module_or_path: readFileSync(require.resolve('@contentauth/c2pa-wasm/c2pa.wasm')) });
    wasmMemory = (exports as unknown as { memory?: { buffer: ArrayBuffer } }).memory;
    return m;
  })();
  return wasm;
}

/** Bytes of the reader's wasm memory in this thread (0 before the first file with credentials). */
export function c2paMemoryBytes(): number {
  return wasmMemory?.buffer.byteLength ?? 0;
}

/** A training-and-data-mining entry: `use` and whatever else the assertion says about it. */
export interface TrainingEntry {
  use?: string;
  [field: string]: unknown;
}

/** The part of the reader's JSON report used here. */
export interface StoreJson {
  active_manifest?: string;
  validation_state?: string;
  /** The reader's status codes (failures, and untrusted credentials a Valid state allows). */
  validation_status?: { code?: string; explanation?: string }[];
  manifests?: Record<string, { assertions?: { label?: string; data?: { entries?: Record<string, TrainingEntry> } }[] }>;
}

/**
 * Settings every read and build here uses: nothing is fetched from the network (a manifest store that
 * points at a remote manifest, or OCSP), whatever the file asks for. `validate: false` only parses.
 */
export function readerSettings(validate = true): string {
  return JSON.stringify({
    verify: { verify_after_reading: validate, remote_manifest_fetch: false, ocsp_fetch: false },
    builder: { thumbnail: { enabled: false } },
  });
}

/** The reader's JSON report of a manifest store (the caller has checked one is present); throws what the reader throws. */
export async function readStore(format: C2paContainer, bytes: Uint8Array, validate = true): Promise<StoreJson> {
  const m = await loadC2pa();
  const reader = await m.WasmReader.fromBytes(MIME[format], bytes, readerSettings(validate));
  try {
    return JSON.parse(reader.json()) as StoreJson;
  } finally {
    reader.free();
  }
}

/** The training-and-data-mining entries of the active manifest (C2PA or CAWG assertion), by entry name. */
export function activeTrainingEntries(store: StoreJson): Record<string, TrainingEntry> {
  const active = store.active_manifest ? store.manifests?.[store.active_manifest] : undefined;
  const out: Record<string, TrainingEntry> = {};
  for (const a of active?.assertions ?? []) {
    if (a.label && TRAINING_LABEL.test(a.label)) Object.assign(out, a.data?.entries ?? {});
  }
  return out;
}

/** Whether a reader's report says the store validates (Valid or Trusted). */
export const storeIsValid = (store: StoreJson): boolean => store.validation_state === 'Valid' || store.validation_state === 'Trusted';

/**
 * Failure codes of checks the reader does not make here because they need a network (every read runs
 * with fetching off, readerSettings): resolving a CAWG identity claim issuer's DID, an OCSP answer, a
 * remote manifest. A store that fails only these is neither valid nor broken as far as this server can
 * tell: its validity depends on a reader that makes them.
 */
export const OFFLINE_CODES: Record<string, string> = {
  'cawg.ica.did_unavailable': "a CAWG identity claim's issuer DID was not resolved (it needs a network)",
  'signingCredential.ocsp.inaccessible': "the signing certificate's revocation status (OCSP) was not fetched",
  'manifest.inaccessible': 'a remote manifest was not fetched',
};
/** Codes a Valid state allows too: a signer or identity issuer on no trust list the reader knows. */
const TOLERATED = /(\.untrusted|\.untrusted_issuer)$/;

/** What a reader's report says of a store's credentials, with the failure codes that decide it. */
export interface CredentialState {
  /** `valid`: Valid or Trusted; `offline`: fails only checks that need a network (OFFLINE_CODES); `invalid`: anything else. */
  kind: 'valid' | 'offline' | 'invalid';
  /** The reader's validation_state. */
  state: string;
  /** The failure codes, untrusted signers (which a Valid state allows) left out. */
  failures: string[];
  /** The codes a Valid state allows that the reader reported (`signingCredential.untrusted`). */
  untrusted: string[];
}

/** A reader's report as a CredentialState. */
export function credentialState(store: StoreJson): CredentialState {
  const codes = [...new Set((store.validation_status ?? []).map((s) => s?.code).filter((c): c is string => typeof c === 'string'))];
  const untrusted = codes.filter((c) => TOLERATED.test(c));
  const failures = codes.filter((c) => !TOLERATED.test(c));
  const state = store.validation_state ?? 'unknown';
  if (storeIsValid(store)) return { kind: 'valid', state, failures, untrusted };
  const offline = failures.length > 0 && failures.every((c) => c in OFFLINE_CODES);
  return { kind: offline ? 'offline' : 'invalid', state, failures, untrusted };
}

/** The failure codes of a state as text, the offline ones explained; at most `max` named. */
export function describeFailures(s: CredentialState, max = 6): string {
  const named = s.failures.slice(0, max).map((c) => (OFFLINE_CODES[c] ? `${c}: ${OFFLINE_CODES[c]}` : c));
  const more = s.failures.length > max ? `, and ${s.failures.length - max} more` : '';
  return named.length > 0 ? `${named.join(', ')}${more}` : `state ${s.state}`;
}

/** The strictest training use in the active manifest of a reader's JSON report (exported for tests). */
export function strictestTrainingUse(store: StoreJson): TrainingUse | null {
  const active = store.active_manifest ? store.manifests?.[store.active_manifest] : undefined;
  let best: TrainingUse | null = null;
  for (const a of active?.assertions ?? []) {
    if (!a.label || !TRAINING_LABEL.test(a.label)) continue;
    for (const [name, entry] of Object.entries(a.data?.entries ?? {})) {
      if (!TRAINING_ENTRY.test(name)) continue;
      const use = entry?.use;
      if (use !== 'allowed' && use !== 'constrained' && use !== 'notAllowed') continue;
      if (!best || RANK[use] > RANK[best]) best = use;
    }
  }
  return best;
}

function invalidMessage(s: CredentialState): string {
  if (s.kind === 'offline') {
    return `The image's Content Credentials could not be validated here: they fail only checks that need a network, which this server does not make (${describeFailures(s)}); whether they are valid depends on a reader that makes them.`;
  }
  return `The image's Content Credentials do not validate (state ${s.state}${s.failures.length > 0 ? `: ${describeFailures(s)}` : ''}).`;
}

/**
 * What the file's Content Credentials say. Files without a manifest store never load the wasm reader and
 * cost no walk when the caller hands their structure (one header walk given bytes); a store whose
 * lengths do not fit is reported (content_credentials_malformed) unread.
 */
export async function readC2pa(format: C2paContainer, input: Uint8Array | ParsedImage): Promise<C2paReading> {
  const image = input instanceof Uint8Array ? FORMATS.get(format)!.parse(input) : input;
  if (image.manifestStore === undefined) return { c2pa: ABSENT, warnings: [] };
  // Lengths the store cannot hold never reach the reader (it reserves memory for a declared length before
  // it finds the bytes missing). Verify reports such a store as a finding, beside the opt-out it still
  // reads; protect refuses it (422 content_credentials_malformed, src/c2pa/update.ts), as it cannot update it.
  try {
    checkManifestStore(image);
  } catch (err) {
    if (!(err instanceof MalformedStoreError)) throw err;
    return { c2pa: { present: true, valid: false, trainingMining: null }, warnings: [{ code: err.code, message: err.message }] };
  }
  let store: StoreJson;
  try {
    store = await readStore(format, image.bytes);
  } catch (err) {
    const why = String((err as Error)?.message ?? err).slice(0, 200);
    return {
      c2pa: { present: true, valid: false, trainingMining: null },
      warnings: [{ code: C2PA_UNREADABLE, message: `The image carries a C2PA manifest store that the reader could not read (${why}).` }],
    };
  }
  const state = credentialState(store);
  const valid = state.kind === 'valid';
  const c2pa: C2paReport = { present: true, valid, trainingMining: strictestTrainingUse(store) };
  const warnings = valid ? [] : [{ code: C2PA_INVALID, message: invalidMessage(state) }];
  return { c2pa, warnings };
}
