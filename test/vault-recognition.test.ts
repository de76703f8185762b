/**
 * Recognition's parts: the nearest-originals scan (src/vault/recognition.ts), the hash an original keeps,
 * and the ingest hook that hashes in the real image pool (the built worker).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PDQ_MATCH_DISTANCE, PDQ_MIN_QUALITY, perceptualHash } from '../src/vault/phash.js';
import { type HashedObject, keptHash, MAX_VAULT_MATCHES, nearest } from '../src/vault/recognition.js';
import { ROOT, type TestPool, testPool } from './helpers/server.js';

const NATURAL = fileURLToPath(new URL('../../shared/natural', import.meta.url));
const ZERO = '0'.repeat(64);

/** ZERO with the first `n` bits (of the last words) set: distance n from ZERO. */
function withBits(n: number): string {
  const bits = '1'.repeat(n).padStart(256, '0');
  let hex = '';
  for (let i = 0; i < 256; i += 4) hex += Number.parseInt(bits.slice(i, i + 4), 2).toString(16);
  return hex;
}

describe('nearest', () => {
  const objects: HashedObject[] = [
    { id: 'b', name: 'far.jpg', phash: withBits(PDQ_MATCH_DISTANCE + 1), record: null },
    { id: 'c', name: 'edge.jpg', phash: withBits(PDQ_MATCH_DISTANCE), record: 'rec-1' },
    { id: 'a', name: 'same.jpg', phash: ZERO, record: null },
    { id: 'd', name: 'near.jpg', phash: withBits(3), record: null },
    { id: 'e', name: 'also-near.jpg', phash: withBits(3), record: null },
    { id: 'f', name: 'damaged.jpg', phash: `${'z'.repeat(8)}${ZERO.slice(8)}`, record: null },
    { id: 'g', name: 'short.jpg', phash: '00', record: null },
  ];

  it('reports those within the match distance, nearest first, ties by id', () => {
    expect(nearest(objects, ZERO)).toEqual([
      { id: 'a', name: 'same.jpg', distance: 0, record: null },
      { id: 'd', name: 'near.jpg', distance: 3, record: null },
      { id: 'e', name: 'also-near.jpg', distance: 3, record: null },
      { id: 'c', name: 'edge.jpg', distance: PDQ_MATCH_DISTANCE, record: 'rec-1' },
    ]);
  });

  it('keeps to the given distance and count', () => {
    expect(nearest(objects, ZERO, 2).map((m) => m.id)).toEqual(['a']);
    expect(nearest(objects, ZERO, 256, 2).map((m) => m.id)).toEqual(['a', 'd']);
    const many = Array.from({ length: 50 }, (_, i) => ({ id: `o${String(i).padStart(2, '0')}`, name: `${i}.png`, phash: ZERO, record: null }));
    expect(nearest(many, ZERO)).toHaveLength(MAX_VAULT_MATCHES);
  });

  it('refuses a probe that is no hash', () => {
    expect(() => nearest(objects, 'abc')).toThrow(RangeError);
  });
});

describe('keptHash', () => {
  it('keeps a hash of enough quality only', () => {
    expect(keptHash({ hash: ZERO, quality: PDQ_MIN_QUALITY })).toBe(ZERO);
    expect(keptHash({ hash: ZERO, quality: PDQ_MIN_QUALITY - 1 })).toBeNull();
    expect(keptHash(null)).toBeNull();
  });
});

describe('the ingest hook in the image pool', () => {
  let dir: string;
  let pool: TestPool;
  let hashOf: (bytes: Uint8Array) => Promise<string | null>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'optmark-phash-'));
    pool = await testPool(dir);
    const { poolHashOf } = (await import(
      pathToFileURL(join(ROOT, 'dist', 'src', 'vault', 'recognition.js')).href
    )) as typeof import('../src/vault/recognition.js');
    hashOf = poolHashOf(pool.pool);
  });
  afterAll(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives the photograph's PDQ, the caller's bytes left as they were", async () => {
    const bytes = readFileSync(join(NATURAL, 'kodim07.png'));
    const copy = Buffer.from(bytes);
    expect(await hashOf(bytes)).toBe((await perceptualHash(bytes))!.hash);
    expect(bytes.equals(copy)).toBe(true);
  });

  it('keeps no hash for bytes that are no image, or a featureless picture', async () => {
    expect(await hashOf(Buffer.from('no image here'))).toBeNull();
    const flat = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#7a7a7a' } })
      .png()
      .toBuffer();
    expect((await perceptualHash(flat))!.quality).toBeLessThan(PDQ_MIN_QUALITY);
    expect(await hashOf(flat)).toBeNull();
  });
});
