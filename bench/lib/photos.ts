/**
 * The photographs the file benchmarks resize into their inputs, so that they run on any clone:
 * BENCH_PHOTOS (a folder of PNG or JPEG files) when set; else the development checkout's natural set
 * beside the repository (`../shared/natural`, the Kodak photos the figures in bench/RESULTS.md were
 * measured on) when it is there; else photo-like images generated here (bench/load/corpus.ts's generator,
 * deterministic), which compress like camera output but are no photographs: say which in a report.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { syntheticPhoto } from '../load/corpus.js';

/** dist/bench/lib/ -> the repository -> the folder beside it. */
const NATURAL = fileURLToPath(new URL('../../../../shared/natural', import.meta.url));

export interface Photos {
  /** Where they come from, for the report's header. */
  source: string;
  /** File paths or encoded PNG bytes, each an input sharp reads. */
  inputs: Array<string | Buffer>;
}

/** Up to `count` source photos (all of a folder's when it has fewer; generated ones: exactly `count`). */
export async function sourcePhotos(count: number): Promise<Photos> {
  const dir = process.env.BENCH_PHOTOS || (existsSync(NATURAL) ? NATURAL : undefined);
  if (dir) {
    const files = readdirSync(dir)
      .filter((f) => /\.(png|jpe?g)$/i.test(f))
      .sort()
      .slice(0, count);
    if (files.length === 0) throw new Error(`no PNG or JPEG files in ${dir}`);
    return { source: dir, inputs: files.map((f) => join(dir, f)) };
  }
  const inputs: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const raw = await syntheticPhoto(768, 512, 6, 0.25, 42 + i);
    inputs.push(
      await sharp(raw, { raw: { width: 768, height: 512, channels: 3 } })
        .png()
        .toBuffer(),
    );
  }
  return { source: `${count} generated photo-like images (set BENCH_PHOTOS for your own)`, inputs };
}
