/**
 * A batch lane on its own thread (`optmark mark` / `optmark verify` with --jobs > 1): it is given paths,
 * never bytes, reads and writes the files itself with one reused buffer, and answers each job with
 * its report line. It loads only what the chosen layers need (src/batch/work.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Lane, type FileJob, type LaneSetup } from '../src/batch/work.js';

export interface JobMessage {
  id: number;
  job: FileJob;
}

const port = parentPort!;
const lane = new Lane(workerData as LaneSetup);

// Jobs arrive while one runs; they are done one after the other, in the order given.
const queue: JobMessage[] = [];
let running = false;

async function drain(): Promise<void> {
  running = true;
  while (queue.length > 0) {
    const { id, job } = queue.shift()!;
    const outcome = await lane.run(job);
    port.postMessage({ id, outcome });
  }
  running = false;
}

lane.prepare().then(
  () => {
    port.postMessage({ ready: true });
    port.on('message', (msg: JobMessage) => {
      queue.push(msg);
      if (!running) void drain();
    });
  },
  (err: unknown) => port.postMessage({ ready: false, error: err instanceof Error ? err.message : String(err) }),
);
