/**
 * The image worker (piscina): every per-byte job runs here, never on the event-loop thread. It imports
 * no HTTP, auth or store code. Results come back as values, their buffers moved (transferred), not copied.
 */
import { threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import sharp from 'sharp';
import { toErrorShape } from '../src/errors.js';
import { LiveLayers } from '../src/pipeline/layers-live.js';
import { runDashboardMark } from '../src/pipeline/dashboard.js';
import { runMark } from '../src/pipeline/mark.js';
import { runProtect } from '../src/pipeline/protect.js';
import type { ArenaRange, Task, TaskResult, WorkerInit } from '../src/pipeline/tasks.js';
import { parseUpload, safeBasename } from '../src/pipeline/upload.js';
import { runVerify } from '../src/pipeline/verify.js';
import { warmUp } from '../src/pipeline/warmup.js';

// The pool provides the parallelism: one libvips thread per worker keeps CPU use predictable.
sharp.concurrency(1);
sharp.cache(false);

const init = workerData as WorkerInit;

/** A view of an arena range; the arena is mapped once per worker, so a request costs no allocation. */
function arenaView(range: ArenaRange): Uint8Array {
  if (!init.arena) throw new Error('this pool has no arena');
  return new Uint8Array(init.arena, range.offset, range.length);
}
// Keys and secrets load once per worker, on first use or at warm-up, never per request.
const layers = new LiveLayers(init);

/** A view that owns its whole ArrayBuffer (a pooled or oversized one must not be transferred). */
function standalone(view: Uint8Array): Uint8Array {
  if (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && view.buffer instanceof ArrayBuffer) return view;
  const copy = new Uint8Array(view.byteLength);
  copy.set(view);
  return copy;
}

/** Marks the result's buffer for transfer back to the event-loop thread. */
function moved(result: TaskResult): TaskResult {
  if (!result.ok || result.kind === 'warm' || result.kind === 'arena-body') return result;
  const out = result.kind === 'body' ? { ...result, body: standalone(result.body) } : { ...result, bytes: standalone(result.bytes) };
  const buffer = (out.kind === 'body' ? out.body : out.bytes).buffer;
  return Piscina.move({
    get [Piscina.transferableSymbol]() {
      return [buffer];
    },
    get [Piscina.valueSymbol]() {
      return out;
    },
  } as unknown as ArrayBuffer) as unknown as TaskResult;
}

export default async function handle(task: Task): Promise<TaskResult> {
  const started = performance.now();
  const result = await perform(task);
  // The worker's own time on the task (parse, mark, answer build): the event-loop thread tells it
  // apart from the wait for a worker in the answer's Server-Timing.
  result.workMs = performance.now() - started;
  return moved(result);
}

async function perform(task: Task): Promise<TaskResult> {
  try {
    switch (task.kind) {
      case 'protect': {
        const upload = await parseUpload(arenaView(task.input), task.contentType, init.maxUploadBytes);
        return runProtect(upload.bytes, safeBasename(upload.filename), task.output && arenaView(task.output), init.maxUploadBytes);
      }
      case 'verify': {
        const upload = await parseUpload(arenaView(task.input), task.contentType, init.maxUploadBytes);
        return await runVerify(upload.bytes, layers);
      }
      case 'mark':
        return await runMark(task, layers);
      case 'dashboard-mark':
        return await runDashboardMark(arenaView(task.input), task, layers, init.maxUploadBytes);
      case 'warmup':
        await Promise.all([warmUp(), layers.warm()]);
        return { ok: true, kind: 'warm', threadId };
    }
  } catch (err) {
    const error = toErrorShape(err);
    const detail = error.code === 'internal_error' && err instanceof Error ? (err.stack ?? err.message) : undefined;
    return { ok: false, error, ...(detail ? { detail } : {}) };
  }
}

