/**
 * A batch lane on its own thread (`optmark mark` / `optmark verify` with --jobs > 1): it is given paths,
 * never bytes, reads and writes the files itself with one reused buffer, and answers each job with
 * its report line. It loads only what the chosen layers need (src/batch/work.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Lane, type FileJob, type LaneSetup } from '../src/batch/work.js';
import { toErrorShape } from '../src/errors.js';

/** An error as it crosses the thread: its stable code, and an internal error's own message. */
function errorShape(err: unknown): { code: string; message: string } {
  const shape = toErrorShape(err);
  return shape.code === 'internal_error' && err instanceof Error ? { code: shape.code, message: `${shape.message}: ${err.message}` } : shape;
}

export interface JobMessage {
  id: number;
  job: FileJob;
}

/** A scan's image (src/scans/lanes.ts): bytes moved here, its verify report or error's shape back. */
export interface BytesMessage {
  id: number;
  bytes: Uint8Array;
}

const port = parentPort!;
const lane = new Lane(workerData as LaneSetup);

// Jobs arrive while one runs; they are done one after the other, in the order given.
const queue: (JobMessage | BytesMessage)[] = [];
let running = false;

async function drain(): Promise<void> {
  running = true;
  while (queue.length > 0) {
    const msg = queue.shift()!;
    if ('bytes' in msg) {
      try {
        port.postMessage({ id: msg.id, report: await lane.verifyBytes(msg.bytes) });
      } catch (err) {
        port.postMessage({ id: msg.id, error: errorShape(err) });
      }
      continue;
    }
    const outcome = await lane.run(msg.job);
    port.postMessage({ id: msg.id, outcome });
  }
  running = false;
}

lane.prepare().then(
  () => {
    port.postMessage({ ready: true });
    port.on('message', (msg: JobMessage | BytesMessage) => {
      queue.push(msg);
      if (!running) void drain();
    });
  },
  (err: unknown) => port.postMessage({ ready: false, error: err instanceof Error ? err.message : String(err) }),
);
