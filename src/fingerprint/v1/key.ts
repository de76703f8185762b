/**
 * Version 1's key tile, derived deterministically from the secret (frozen: the detector of version-1 marks
 * needs it as it always was). Two independent parts, each at unit RMS:
 * - sync: a TILE x TILE band-passed Gaussian field, used only to find scale and shift;
 * - count: CELL x CELL cells of independent material (common/key.ts), read by the decision alone. That is
 *   what makes the decision's false-positive bound exact, and it holds because the alignment never looks
 *   at them. Version-1 marks embedded sqrt(1/2) sync + sqrt(1/2) count.
 */
import { TILE } from '../params.js';
import { bandField, countPart, deriveRng, perSecret } from '../common/key.js';

export interface KeyTile {
  /** TILE*TILE, row-major, unit RMS. */
  sync: Float32Array;
  /** TILE*TILE, row-major, unit RMS, independent per CELL x CELL cell. */
  count: Float32Array;
}

/** Builds version 1's key tile from the secret (about 10 ms; keyTileFor caches it). */
export function buildKeyTile(secret: Uint8Array): KeyTile {
  return { sync: bandField(deriveRng('v1', secret, 'sync'), TILE), count: countPart(deriveRng('v1', secret, 'count')) };
}

/** Version 1's key tile for a secret, cached per thread. */
export const keyTileFor = perSecret(buildKeyTile);
