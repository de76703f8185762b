/**
 * `optmark scan`'s verify, without a server: the batch lanes of `optmark verify` (src/batch/work.ts
 * Lane, workers/batch-worker.ts) given a scan's images as bytes instead of paths. With the pixel
 * detector (the heavy case) `jobs` worker threads start at once and the main thread verifies only until
 * the first is up: it reads the source (a tar stream, git's pipes, fetches) and keeps the workers fed,
 * which with a verifying main thread stalled them (1.4x verify's time on 2,000 images; bench/scan.bench.ts).
 * Without it images are cheap: the main thread verifies beside `jobs - 1` workers, started once enough
 * images came to pay for their start, as in src/batch/runner.ts.
 */
import type { Worker } from 'node:worker_threads';
import { Lane, type LaneSetup } from '../batch/work.js';
import type { VerifyReport } from '../pipeline/verify.js';

/** Images handed to a worker ahead, so it never waits for the main thread between two. */
const WORKER_AHEAD = 3;
/** Worker threads start once this many images were verified on the main thread (cheap images). */
const SPAWN_AFTER_IMAGES = 24;

class CodedFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

class WorkerLane {
  inflight = 0;
  readonly ready: Promise<boolean>;
  readonly #worker: Worker;
  readonly #waiting = new Map<number, { resolve(r: VerifyReport): void; reject(e: Error): void }>();
  #next = 0;

  constructor(WorkerClass: typeof Worker, setup: LaneSetup, onFree: () => void) {
    this.#worker = new WorkerClass(new URL('../../workers/batch-worker.js', import.meta.url), { workerData: setup });
    this.ready = new Promise<boolean>((resolve) => {
      this.#worker.on('message', (msg: { ready?: boolean; id?: number; report?: VerifyReport; error?: { code: string; message: string } }) => {
        if (msg.ready !== undefined) return resolve(msg.ready);
        const w = this.#waiting.get(msg.id!);
        this.#waiting.delete(msg.id!);
        this.inflight--;
        if (msg.error) w?.reject(new CodedFailure(msg.error.code, msg.error.message));
        else w?.resolve(msg.report!);
        onFree();
      });
      const fail = (message: string): void => {
        resolve(false);
        for (const [id, w] of this.#waiting) {
          this.#waiting.delete(id);
          w.reject(new CodedFailure('internal_error', message));
        }
      };
      this.#worker.on('error', (err) => fail(err.message));
      this.#worker.on('exit', () => fail('the verify worker stopped'));
    });
  }

  verify(bytes: Uint8Array): Promise<VerifyReport> {
    this.inflight++;
    const id = this.#next++;
    // Moved, not copied, when the bytes own their whole buffer.
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && !(bytes.buffer instanceof SharedArrayBuffer);
    const moved = own ? bytes : new Uint8Array(bytes);
    return new Promise<VerifyReport>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#worker.postMessage({ id, bytes: moved }, [moved.buffer as ArrayBuffer]);
    });
  }

  close(): Promise<number> {
    return this.#worker.terminate();
  }
}

/** Verifies images on worker threads and, while they start or when images are cheap, the main thread. */
export class ScanLanes {
  readonly #setup: LaneSetup;
  readonly #jobs: number;
  readonly #main: Lane;
  readonly #workers: WorkerLane[] = [];
  readonly #starting: WorkerLane[] = [];
  #mainBusy = false;
  readonly #heavy: boolean;
  #verified = 0;
  #spawned = false;
  #spawning: Promise<void> | undefined;
  #closed = false;
  readonly #idle: (() => void)[] = [];

  constructor(setup: LaneSetup, jobs: number) {
    this.#setup = setup;
    this.#jobs = Math.max(1, jobs);
    this.#main = new Lane(setup);
    this.#heavy = !setup.skipFingerprint && setup.init.fingerprintDetect;
  }

  /**
   * Images to have in flight: twice the lanes' room, since a scan hands its items on in order and waits
   * for the oldest while the lanes go on with the next.
   */
  get width(): number {
    return 2 * (this.#heavy ? this.#jobs * WORKER_AHEAD : 1 + (this.#jobs - 1) * WORKER_AHEAD);
  }

  /** Loads the layers (a bad key or secret fails here, once, before any image). */
  async prepare(): Promise<void> {
    await this.#main.prepare();
    if (this.#heavy) this.#spawn();
  }

  #spawn(): void {
    const count = this.#heavy ? this.#jobs : this.#jobs - 1;
    if (this.#spawned || count < 1) return;
    this.#spawned = true;
    this.#spawning = import('node:worker_threads').then(({ Worker: WorkerClass }) => {
      // A scan that ended meanwhile (a source refused at once) starts no thread that would keep the process up.
      if (this.#closed) return;
      for (let i = 0; i < count; i++) {
        const w = new WorkerLane(WorkerClass, this.#setup, () => this.#wake());
        this.#starting.push(w);
        void w.ready.then((ok) => {
          this.#starting.splice(this.#starting.indexOf(w), 1);
          if (ok && !this.#closed) {
            this.#workers.push(w);
            this.#wake();
          } else void w.close();
        });
      }
    });
  }

  #wake(): void {
    for (const f of this.#idle.splice(0)) f();
  }

  /** What verify reports for `bytes` (which may be moved to another thread: not to be used after). */
  async verify(bytes: Uint8Array): Promise<VerifyReport> {
    for (;;) {
      const worker = this.#workers.find((w) => w.inflight < WORKER_AHEAD);
      if (worker) return worker.verify(bytes);
      if (!this.#mainBusy && (!this.#heavy || this.#workers.length === 0)) {
        this.#mainBusy = true;
        try {
          // A turn of the event loop first, so the sources and the workers' answers are served.
          await new Promise<void>((resolve) => setImmediate(resolve));
          return await this.#main.verifyBytes(bytes);
        } finally {
          this.#mainBusy = false;
          if (++this.#verified >= SPAWN_AFTER_IMAGES) this.#spawn();
          this.#wake();
        }
      }
      await new Promise<void>((resolve) => this.#idle.push(resolve));
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#spawning;
    await Promise.all([...this.#workers.splice(0), ...this.#starting].map((w) => w.close()));
  }
}
