/**
 * Nothing a request leaves behind may pile up in an image worker. The worker's event loop does not turn
 * between tasks that finish without real I/O (piscina waits for the next task in Atomics.wait), so
 * anything a protect schedules there and does not wait for stays queued, with everything it holds, until
 * some later task happens to await I/O. That is how every protect once left its multipart receiver
 * behind (about 3 KB each, 876 MiB RSS after 240,000 protects). This test runs protects through the real
 * pool and worker, compares two heap snapshots of the worker (a snapshot collects garbage first, so
 * only what is still held is counted), and fails when any kind of object grew with the request count.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImagePool } from '../../src/pool/pool.js';
import { imageForm, testPool, type TestPool } from '../helpers/server.js';

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Live objects per constructor name in one worker, from a heap snapshot. */
async function liveObjects(pool: ImagePool): Promise<Map<string, number>> {
  const chunks: Buffer[] = [];
  for await (const chunk of await pool.threads[0]!.getHeapSnapshot()) chunks.push(chunk as Buffer);
  const snap = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HeapSnapshot;
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const types = snap.snapshot.meta.node_types[0];
  const counts = new Map<string, number>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    if (types[snap.nodes[i + typeAt]!] !== 'object') continue;
    const name = snap.strings[snap.nodes[i + nameAt]!]!;
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

describe('the image worker under protect-only traffic', () => {
  let workers: TestPool;
  let pool: ImagePool;
  const dataDir = mkdtempSync(join(tmpdir(), 'optmark-leak-'));
  let body: Buffer;
  let contentType: string;

  beforeAll(async () => {
    workers = await testPool(dataDir);
    pool = workers.pool;
    const image = await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 90, g: 140, b: 200 } } })
      .jpeg()
      .toBuffer();
    ({ body, contentType } = imageForm(image));
  });

  afterAll(async () => {
    await pool?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** One protect as the server runs it: the body in a lease of request memory, the answer written back into it. */
  async function protect(): Promise<void> {
    const answer = await workers.request('protect', { body, contentType });
    expect(JSON.parse(answer.toString('utf8'))).toMatchObject({ mimeType: 'image/jpeg' });
  }

  it('holds no more objects after 300 more protects than before them', async () => {
    for (let i = 0; i < 30; i++) await protect();
    const before = await liveObjects(pool);
    const REQUESTS = 300;
    for (let i = 0; i < REQUESTS; i++) await protect();
    const after = await liveObjects(pool);
    const grown = [...after].map(([name, n]) => [name, n - (before.get(name) ?? 0)] as const).filter(([, d]) => d >= REQUESTS / 2);
    expect(grown, 'object kinds that grew with the number of protects').toEqual([]);
    expect(after.get('MultipartReceiver') ?? 0).toBeLessThan(5);
  }, 120_000);
});
