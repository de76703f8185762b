/** The image sizes and formats the file benchmarks generate their inputs in (marking.bench, batch.bench). */
export const SIZES = [
  { label: '1 MP', mp: 1, width: 1224, height: 816 },
  { label: '12 MP', mp: 12, width: 4000, height: 3000 },
  { label: '24 MP', mp: 24, width: 6000, height: 4000 },
] as const;
export type Size = (typeof SIZES)[number];
export const FORMATS = ['jpeg', 'png', 'webp'] as const;
export type Format = (typeof FORMATS)[number];
export const EXT: Record<Format, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };
