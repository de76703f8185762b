// The shared ring in which workers stamp the tasks they start (src/pool/starts.ts): the pool's deadline reads it.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { TaskStarts } from '../src/pool/starts.js';

describe('task start stamps', () => {
  it('a task is not started until its own token is stamped; the stamp carries the thread and the time', () => {
    const starts = new TaskStarts(24);
    expect(starts.started(7)).toBeUndefined();
    const before = Date.now();
    starts.stamp(7, 3);
    const s = starts.started(7);
    expect(s?.threadId).toBe(3);
    expect(s!.at).toBeGreaterThanOrEqual(before);
    expect(s!.at).toBeLessThanOrEqual(Date.now());
    expect(starts.started(8)).toBeUndefined();
  });

  it('a stamp in the same slot for another token (a late one from an older task) never passes for a start', () => {
    const starts = new TaskStarts(24);
    const slots = starts.buffer.byteLength / 16;
    expect(slots).toBeGreaterThanOrEqual(4 * 24);
    starts.stamp(5, 1);
    expect(starts.started(5 + slots)).toBeUndefined();
    starts.stamp(5 + slots, 2);
    expect(starts.started(5)).toBeUndefined();
    expect(starts.started(5 + slots)?.threadId).toBe(2);
  });

  it('tokens past 2^31 still find their own slot', () => {
    const starts = new TaskStarts(8);
    const token = 2 ** 31 + 12;
    starts.stamp(token, 9);
    expect(starts.started(token)?.threadId).toBe(9);
  });

  it("another thread's stamp is seen through the shared buffer", async () => {
    const starts = new TaskStarts(8);
    // The built module, as the image workers load it (npm run build).
    const url = new URL('../dist/src/pool/starts.js', import.meta.url).href;
    const worker = new Worker(
      `import('${url}').then(({ TaskStarts }) => { const { workerData, parentPort } = require('node:worker_threads'); new TaskStarts(workerData).stamp(42, 77); parentPort.postMessage('done'); });`,
      { eval: true, workerData: starts.buffer },
    );
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(starts.started(42)?.threadId).toBe(77);
  });
});
