/**
 * Synthetic pixel arrays for PDQ's reference vectors: integer arithmetic only (a ramp per channel, a
 * checker of blocks and xorshift noise), so that every platform makes the same bytes. The hashes in
 * test/vault-pdq.test.ts were printed by the reference C++ (facebook/ThreatExchange pdq/cpp, built here
 * once) from exactly these arrays.
 */
export type SyntheticCase = readonly [width: number, height: number, channels: 1 | 3, seed: number];

export const SYNTHETIC_CASES: readonly SyntheticCase[] = [
  [64, 64, 3, 1],
  [5, 5, 3, 2],
  [4, 9, 3, 3],
  [100, 37, 3, 4],
  [333, 512, 3, 5],
  [512, 384, 1, 6],
  [640, 480, 3, 7],
  [1024, 768, 3, 8],
  [129, 1000, 1, 9],
];

/** width x height x channels bytes, row-major. */
export function syntheticPixels(width: number, height: number, channels: 1 | 3, seed: number): Uint8Array {
  let s = (seed * 2654435761) >>> 0 || 1;
  const noise = (): number => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s & 63;
  };
  const px = new Uint8Array(width * height * channels);
  let p = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const block = ((Math.trunc((x * 8) / width) ^ Math.trunc((y * 6) / height)) & 1) * 50;
      for (let c = 0; c < channels; c++) {
        const ramp = Math.trunc((x * (c + 1) * 60) / width) + Math.trunc((y * (3 - c) * 40) / height);
        px[p++] = (ramp + block + noise() + seed * 7) & 255;
      }
    }
  }
  return px;
}
