// The worker pool's time limit counts from when a worker starts a task, never from when it was queued.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { imageForm, testPool, type TestPool } from '../helpers/server.js';

describe('the pool time limit', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'optmark-pool-'));
  let workers: TestPool | undefined;
  afterAll(async () => {
    await workers?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a task queued behind one that ran out of time is not charged for its wait, and runs on the replacement worker', async () => {
    workers = await testPool(dataDir, { taskTimeoutMs: 1000 });
    await workers.pool.warmUp();
    // A long task: the fingerprint layer on a 12 MP photo-like image (decode, pattern, re-encode).
    const big = await sharp({ create: { width: 4000, height: 3000, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 40 } } })
      .jpeg({ quality: 90 })
      .toBuffer();
    const small = await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 9, g: 99, b: 199 } } })
      .jpeg()
      .toBuffer();
    const long = workers.pool.run({ kind: 'mark', input: new Uint8Array(big), provenance: false, fingerprint: true });
    const queued = workers.request('verify', imageForm(small));
    const [a, b] = await Promise.allSettled([long, queued]);
    // The queued verify waited for the long task (cut off at its limit, or done), then ran within its own.
    expect(b.status, b.status === 'rejected' ? String(b.reason) : '').toBe('fulfilled');
    expect(JSON.parse((b as PromiseFulfilledResult<Buffer>).value.toString())).toMatchObject({ optedOut: false });
    if (a.status === 'rejected') expect((a.reason as { code?: string }).code).toBe('processing_timeout');
    expect(workers.pool.stats.threads).toBe(1);
  }, 120_000);
});
