/** The verify pipeline: the opt-out field, the provenance tag and the fingerprint detector, as one JSON body. */
import type { Warning } from '../formats/complete.js';
import { type C2paReport, readC2pa, SIGNAL_C2PA_TRAINING } from '../c2pa/reader.js';
import { parseImage, type ParsedImage } from '../formats/index.js';
import { type ReadResult, read } from '../marking/engine.js';
import { jsonBody, sha256Hex } from './body.js';
import type { Layers } from './layers.js';

export interface VerifyReport {
  optedOut: boolean;
  signals: string[];
  provenance: { present: boolean; valid: boolean; verifiable: boolean };
  fingerprint: { present: boolean; confidence: number; blocks: number };
  sha256: string;
  /** What a pipeline should know about the input (shared shape: `{code, message}`); empty when nothing. */
  warnings: Warning[];
  /** Content Credentials (C2PA manifest store): additive, never part of `optedOut`. */
  c2pa: C2paReport;
  /** Reservations found besides the IPTC field: `c2pa.trainingMining`, `tdmrep.reservation`, `rsl.prohibitsTraining`. */
  otherSignals: string[];
}

export const SIGNAL_TDMREP = 'tdmrep.reservation';
export const SIGNAL_RSL = 'rsl.prohibitsTraining';

/** Everything verify reports about the bytes, or their structure (also used by the CLI and tests). */
export async function verifyReport(input: Uint8Array | ParsedImage, layers: Layers): Promise<VerifyReport> {
  const image = input instanceof Uint8Array ? parseImage(input) : input;
  const sha256 = sha256Hex(image.bytes);
  // The answer's fields in their documented order, the hash after the layers'.
  const { optedOut, signals, provenance, fingerprint, ...others } = await reportOf(image, layers);
  return { optedOut, signals, provenance, fingerprint, sha256, ...others };
}

/**
 * verifyReport without the file's SHA-256: what a batch verify of the metadata alone answers, from a
 * file-backed structure whose image data was never read (the detector then is off: `layers` says so).
 */
export async function reportOf(image: ParsedImage, layers: Layers): Promise<Omit<VerifyReport, 'sha256'>> {
  const reading = read(image); // typed errors for unsupported or damaged containers
  const [provenance, detected, others] = await Promise.all([
    layers.verifyProvenance(image),
    layers.detectFingerprint(image),
    otherDeclarations(reading, image),
  ]);
  // A detector that could not look says why among the warnings, its fields those of "not examined".
  const { warning, ...fingerprint } = detected;
  if (warning) others.warnings.push(warning);
  return { optedOut: reading.optedOut, signals: reading.signals, provenance, fingerprint, ...others };
}

/**
 * The declarations besides the IPTC field (Content Credentials, TDMRep) and the warnings of the read:
 * verify's `c2pa`, `otherSignals` and `warnings`. The C2PA reader runs only when a manifest store is present.
 */
export async function otherDeclarations(
  reading: ReadResult,
  input: Uint8Array | ParsedImage,
): Promise<Pick<VerifyReport, 'c2pa' | 'otherSignals' | 'warnings'>> {
  const credentials = await readC2pa(reading.format, input);
  const { c2pa } = credentials;
  const otherSignals: string[] = [];
  if (c2pa.trainingMining === 'notAllowed' || c2pa.trainingMining === 'constrained') otherSignals.push(SIGNAL_C2PA_TRAINING);
  if (reading.tdmrep.reserved) otherSignals.push(SIGNAL_TDMREP);
  if (reading.rsl.prohibitsTraining) otherSignals.push(SIGNAL_RSL);
  return { c2pa, otherSignals, warnings: [...reading.warnings, ...credentials.warnings] };
}

/** Verifies `image`: the answer's body (UTF-8 JSON) and the SHA-256 of `image` it reports. */
export async function runVerify(image: Uint8Array, layers: Layers): Promise<{ body: Uint8Array; sha256: string }> {
  const report = await verifyReport(image, layers);
  return { body: jsonBody(report), sha256: report.sha256 };
}
