/**
 * The optional layers as the pipelines see them: verification of the provenance tag and detection of
 * the fingerprint, plus applying them on the layer path. Until a layer is configured it reports "not
 * found", never an invented value.
 */
import type { Warning } from '../formats/complete.js';
import type { ParsedImage } from '../formats/index.js';

export interface ProvenanceStatus {
  present: boolean;
  valid: boolean;
  verifiable: boolean;
}

export interface FingerprintStatus {
  present: boolean;
  confidence: number;
  blocks: number;
  /** Why the detector did not look (blocks 0) where it should have; verify moves it to its `warnings`. */
  warning?: Warning;
}

/** Each takes the file's structure when verify holds it, so that no layer walks the file again. */
export interface Layers {
  verifyProvenance(input: Uint8Array | ParsedImage): Promise<ProvenanceStatus>;
  detectFingerprint(input: Uint8Array | ParsedImage): Promise<FingerprintStatus>;
}

export const NOT_FOUND_PROVENANCE: ProvenanceStatus = Object.freeze({ present: false, valid: false, verifiable: false });
export const NOT_FOUND_FINGERPRINT: FingerprintStatus = Object.freeze({ present: false, confidence: 0, blocks: 0 });

/** Layers that find nothing: what verify reports when a layer is switched off. */
export const noLayers: Layers = {
  verifyProvenance: async () => ({ ...NOT_FOUND_PROVENANCE }),
  detectFingerprint: async () => ({ ...NOT_FOUND_FINGERPRINT }),
};

/** The same layers without the pixel detector (verify `?fingerprint=skip`): the fingerprint reported as not examined. */
export function withoutFingerprint(layers: Layers): Layers {
  return {
    verifyProvenance: (input) => layers.verifyProvenance(input),
    detectFingerprint: async () => ({ ...NOT_FOUND_FINGERPRINT }),
  };
}
