/** The verify pipeline: the opt-out field, the provenance tag and the fingerprint detector, as one JSON body. */
import type { Warning } from '../formats/complete.js';
import { read } from '../marking/engine.js';
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
}

/** Everything verify reports about the bytes (also used by the CLI and tests). */
export async function verifyReport(input: Uint8Array, layers: Layers): Promise<VerifyReport> {
  const sha256 = sha256Hex(input);
  const reading = read(input); // typed errors for unsupported or damaged containers
  const [provenance, fingerprint] = await Promise.all([layers.verifyProvenance(input), layers.detectFingerprint(input)]);
  return { optedOut: reading.optedOut, signals: reading.signals, provenance, fingerprint, sha256, warnings: reading.warnings };
}

/** Verifies `image` and returns the answer's body (UTF-8 JSON). */
export async function runVerify(image: Uint8Array, layers: Layers): Promise<Uint8Array> {
  return jsonBody(await verifyReport(image, layers));
}
