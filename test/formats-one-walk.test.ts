/**
 * One walk per file (src/formats/types.ts): verify and protect walk the container of the file they are
 * given once, and hand its structure to every layer (the opt-out read, the provenance tag and its
 * digest, Content Credentials, the fingerprint detector). The walks are counted with the formats'
 * test watch, the real code running; walks of other bytes (a produced file checked) are not counted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialsPolicy } from '../src/pipeline/credentials.js';
import { watchWalks } from '../src/formats/walks.js';
import { LiveLayers } from '../src/pipeline/layers-live.js';
import { runMark } from '../src/pipeline/mark.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { withCredentials } from './helpers/c2pa.js';
import { type Format, smallImage } from './helpers/images.js';

let dataDir: string;
let live: LiveLayers;
let policy: ReturnType<typeof credentialsPolicy>;

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-one-walk-'));
  live = new LiveLayers({ dataDir, maxPixels: 1e8, signingKeyFile: undefined, fingerprintSecretFile: undefined, fingerprintDetect: true });
  policy = credentialsPolicy('update', { dataDir });
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** How many container walks `run` makes of bytes equal to `file`, and what it returned. */
async function walksOf<T>(file: Uint8Array, run: () => Promise<T>): Promise<{ walks: number; result: T }> {
  let walks = 0;
  const stop = watchWalks((bytes) => {
    if (Buffer.compare(bytes, file) === 0) walks++;
  });
  try {
    return { result: await run(), walks };
  } finally {
    stop();
  }
}

/** The four kinds of input: plain, with a provenance tag, with Content Credentials, with both. */
async function inputs(format: Format): Promise<Record<string, Uint8Array>> {
  const plain = new Uint8Array(await smallImage(format, 640, 480));
  const credentialed = await withCredentials(format, plain);
  const tagged = (await runMark(plain, { provenance: true }, live)).bytes;
  const both = (await runMark(credentialed, { provenance: true }, live, policy)).bytes;
  return { plain, tagged, credentialed, both };
}

describe.each(['jpeg', 'png', 'webp'] as const)('%s: one walk per request', (format) => {
  let files: Record<string, Uint8Array>;
  beforeAll(async () => {
    files = await inputs(format);
  });

  it.each(['plain', 'tagged', 'credentialed', 'both'])('verify walks a %s file once', async (kind) => {
    const file = files[kind]!;
    const { walks, result } = await walksOf(file, () => verifyReport(file, live));
    expect(result.provenance).toMatchObject({ present: kind === 'tagged' || kind === 'both', valid: kind === 'tagged' || kind === 'both' });
    expect(result.c2pa.present).toBe(kind === 'credentialed' || kind === 'both');
    expect(result.fingerprint.blocks).toBeGreaterThan(0); // the detector looked, from the same walk
    expect(walks).toBe(1);
  });

  it.each(['plain', 'tagged', 'credentialed', 'both'])('protect walks a %s file once, with and without the provenance layer', async (kind) => {
    const file = files[kind]!;
    for (const options of [{}, { provenance: true }]) {
      const { walks, result } = await walksOf(file, () => runMark(file, options, live, policy));
      expect(result.signals.length).toBeGreaterThan(0);
      expect(result.credentials).toBe(kind === 'credentialed' || kind === 'both' ? (result.changed ? 'updated' : 'unchanged') : 'none');
      expect({ options, walks }).toEqual({ options, walks: 1 });
    }
  });
});
