/**
 * Runs a batch: files come from a stream (sources.ts), go to lanes (the main thread, plus batch
 * workers given paths once the batch is big enough to pay for starting them), and their report lines
 * are written as they finish. An interrupt (SIGINT, SIGTERM) stops handing out files, lets the ones
 * under way finish (each output is renamed into place whole, or its temporary file removed), and says
 * how far the run got.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { basename, relative } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { removeUnfinished } from './files.js';
import type { Entry, Found } from './sources.js';
import { detectFormat } from '../formats/index.js';
import { Lane, outputName, type FileJob, type FileOutcome, type LaneSetup } from './work.js';

/** Files a worker is handed ahead, so it never waits for the main thread between two. */
const WORKER_AHEAD = 3;
/**
 * Worker threads start once this many files were handed out (the main thread does the first ones while
 * they start): a thread costs about a tenth of a second of CPU to start (V8, the modules), which a small
 * batch would not win back, and a large one wins back early.
 */
const SPAWN_AFTER_FILES = 24;
/**
 * The same for a verify of the metadata alone (--skip-fingerprint without --sha256): a file then costs
 * a few hundred microseconds (its metadata and its last two bytes), so a thread's start-up is won back
 * only after about a thousand files.
 */
const SPAWN_AFTER_FILES_METADATA = 1000;
/** The main thread's lane lets the event loop turn at least this often (ms). */
const YIELD_EVERY_MS = 1;

export interface BatchHooks {
  /** A found file as a job, or an outcome when it is refused before being read. */
  plan(found: Found): FileJob | FileOutcome;
  /** Every outcome, in the order files finish (report line, progress, summary). */
  record(outcome: FileOutcome): void;
  /** Called on an interrupt: stop the source (close a list being read). */
  interrupt?(): void;
  /**
   * The command's own work around a file (mark --vault: read the original before, keep the pair after):
   * calls `run` for the lane's outcome and resolves with the one to record. Its time holds the file's
   * lane as the lane's own work does, so files waiting on it stay bounded by the lanes' capacity.
   */
  around?(job: FileJob, run: () => Promise<FileOutcome>): Promise<FileOutcome>;
  /**
   * The input that writes `rel` below --out under its own name, if any (`source`: the file being
   * renamed to it); see sources.ts argumentClaims and listClaims.
   */
  claimant(rel: string, source: string): string | undefined;
}

export interface BatchResult {
  interrupted: boolean;
  /** Files handed to a lane (each finished, whatever its outcome). */
  started: number;
}

interface Slot {
  /** Files handed to this lane and not yet answered. */
  inflight: number;
  /** Files of this lane in the command's work around them (BatchHooks.around), before or after the lane's. */
  held: number;
  readonly capacity: number;
  run(job: FileJob): Promise<FileOutcome>;
  close(): Promise<void>;
}

/** The main thread as a lane, one file at a time, each started after a turn of the event loop. */
class MainSlot implements Slot {
  inflight = 0;
  held = 0;
  readonly capacity = 1;
  readonly #lane: Lane;
  #turnAt = 0;
  constructor(lane: Lane) {
    this.#lane = lane;
  }
  async run(job: FileJob): Promise<FileOutcome> {
    this.inflight++;
    try {
      // Worker answers and signals are handled between two files: a turn of the event loop
      // when the last one is more than a millisecond ago (one per file cost more than a small file).
      const now = performance.now();
      if (now - this.#turnAt >= YIELD_EVERY_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        this.#turnAt = performance.now();
      }
      return await this.#lane.run(job);
    } finally {
      this.inflight--;
    }
  }
  async close(): Promise<void> {}
}

/** A batch worker thread (workers/batch-worker.ts). */
class WorkerSlot implements Slot {
  inflight = 0;
  held = 0;
  readonly capacity = WORKER_AHEAD;
  readonly ready: Promise<boolean>;
  readonly #worker: Worker;
  readonly #waiting = new Map<number, (o: FileOutcome) => void>();
  #next = 0;
  #failed: string | undefined;

  constructor(WorkerClass: typeof Worker, setup: LaneSetup) {
    this.#worker = new WorkerClass(new URL('../../workers/batch-worker.js', import.meta.url), { workerData: setup });
    this.ready = new Promise<boolean>((resolve) => {
      this.#worker.on('message', (msg: { ready?: boolean; error?: string; id?: number; outcome?: FileOutcome }) => {
        if (msg.ready !== undefined) {
          if (!msg.ready) this.#failed = msg.error;
          resolve(msg.ready);
          return;
        }
        const done = this.#waiting.get(msg.id!);
        this.#waiting.delete(msg.id!);
        done?.(msg.outcome!);
      });
      this.#worker.on('error', (err) => {
        this.#failed = err.message;
        resolve(false);
        this.#failAll(err.message);
      });
      this.#worker.on('exit', () => {
        resolve(false);
        this.#failAll(this.#failed ?? 'the batch worker stopped');
      });
    });
  }

  run(job: FileJob): Promise<FileOutcome> {
    this.inflight++;
    const id = this.#next++;
    return new Promise<FileOutcome>((resolve) => {
      this.#waiting.set(id, (o) => {
        this.inflight--;
        resolve(o);
      });
      this.#worker.postMessage({ id, job });
    });
  }

  #failAll(message: string): void {
    for (const [id, done] of this.#waiting) {
      this.#waiting.delete(id);
      done({ input: '', format: null, bytes: null, status: 'failed', code: 'internal_error', message });
    }
  }

  async close(): Promise<void> {
    await this.#worker.terminate();
  }
}

/** The default --jobs with worker threads: one lane per CPU this process may use. */
export function defaultJobs(): number {
  return Math.max(1, availableParallelism());
}

/** Runs every entry through the lanes; resolves when all started files are finished. */
export async function runBatch(entries: AsyncIterable<Entry>, setup: LaneSetup, jobsAsked: number | undefined, hooks: BatchHooks): Promise<BatchResult> {
  const main = new Lane(setup);
  const jobs = jobsAsked ?? defaultJobs();
  await main.prepare(); // a bad key or secret fails here, once, before any file
  const slots: Slot[] = [new MainSlot(main)];
  let spawned = false;
  let started = 0;
  let stopping = false;
  let wake: (() => void) | undefined;
  const changed = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onSignal = (): void => {
    if (stopping) process.stderr.write('optmark: finishing the files under way, then stopping\n');
    stopping = true;
    // A run waiting for the next name of a list (stdin) stops waiting: the list is closed. (Not a
    // Promise.race per file against a stop promise: each race would stay attached to it, 100,000 of them.)
    hooks.interrupt?.();
    changed();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Outputs renamed into place by a crashed run would be whole; temporary ones are removed on any exit.
  const onExit = (): void => removeUnfinished();
  process.on('exit', onExit);

  const renamed = new Map<string, string>();
  const pending = new Set<Promise<void>>();

  /** A lane with room, waiting for one when all are busy; undefined once stopping. */
  const acquire = async (): Promise<Slot | undefined> => {
    for (;;) {
      if (stopping) return undefined;
      // Workers first: the main thread also reads the folder and writes the report.
      for (let i = slots.length - 1; i >= 0; i--) if (slots[i]!.inflight + slots[i]!.held < slots[i]!.capacity) return slots[i];
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };

  const spawn = async (): Promise<void> => {
    spawned = true;
    // Loaded only now: a small batch never pays for the worker machinery.
    const { Worker: WorkerClass } = await import('node:worker_threads');
    for (let i = 1; i < jobs; i++) {
      const w = new WorkerSlot(WorkerClass, setup);
      // A worker joins the lanes once it is up; one that fails to start is left out (the others go on).
      void w.ready.then((ok) => {
        if (ok && !stopping) {
          slots.push(w);
          changed();
        } else void w.close();
      });
      workers.push(w);
    }
  };
  const workers: WorkerSlot[] = [];
  let spawning: Promise<void> | undefined;
  const heavy = setup.fingerprint || (setup.command === 'verify' && !setup.skipFingerprint && setup.init.fingerprintDetect);
  const spawnAfter = setup.command === 'verify' && setup.skipFingerprint && !setup.hash ? SPAWN_AFTER_FILES_METADATA : SPAWN_AFTER_FILES;

  const dispatch = async (slot: Slot, job: FileJob): Promise<void> => {
    started++;
    // The file counts against its lane from here to its record: as `held` outside the lane's run.
    slot.held++;
    const run = async (): Promise<FileOutcome> => {
      slot.held--;
      try {
        let outcome = await slot.run(job);
        if (outcome.status === 'rename') outcome = await confirmRename(job, outcome);
        return outcome.input === '' ? { ...outcome, input: job.input } : outcome;
      } finally {
        slot.held++;
      }
    };
    try {
      hooks.record(await (hooks.around ? hooks.around(job, run) : run()));
    } finally {
      slot.held--;
    }
  };

  /**
   * An output whose name differs from its input's (wrong or no extension) must not land on another
   * input's output: not on the file of that name beside the input, nor on another renamed one.
   */
  const confirmRename = async (job: FileJob, outcome: FileOutcome): Promise<FileOutcome> => {
    const target = outcome.output!;
    const other = renamed.get(target) ?? writesOwnName(hooks.claimant(relative(job.outDir!, target), job.source));
    if (other !== undefined) {
      return {
        input: job.input,
        output: target,
        format: outcome.format,
        bytes: null,
        status: 'failed',
        code: 'output_collision',
        message: `output ${target} would also be written for ${other}`,
      };
    }
    renamed.set(target, job.input);
    return (slots[0] as MainSlot).run({ ...job, target });
  };

  const iterator = entries[Symbol.asyncIterator]();
  try {
    while (!stopping) {
      let next: IteratorResult<Entry>;
      try {
        next = await iterator.next();
      } catch (err) {
        if (stopping) break; // the list closed by the interrupt
        throw err;
      }
      if (next.done || stopping) break;
      const entry = next.value;
      if (entry.kind === 'passed') {
        hooks.record({ input: entry.input, output: null, format: null, bytes: null, status: entry.status, code: entry.code, message: entry.message });
        continue;
      }
      const planned = hooks.plan(entry);
      if (!('source' in planned)) {
        hooks.record(planned);
        continue;
      }
      // Pixel work (fingerprint, detector) takes long per file: threads start at once.
      if (!spawned && jobs > 1 && (heavy || started >= spawnAfter)) spawning = spawn();
      const slot = await acquire();
      if (!slot) break;
      const p: Promise<void> = dispatch(slot, planned).finally(() => {
        pending.delete(p);
        changed();
      });
      pending.add(p);
    }
  } finally {
    await Promise.all(pending);
    await spawning;
    await Promise.all(workers.map((w) => w.close()));
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', onExit);
    // A generator still waiting for its input (an interrupted list on stdin) is left to the exit.
    if (!stopping) await iterator.return?.(undefined);
  }
  return { interrupted: stopping, started };
}

/**
 * `path` when the file there, as an input, would keep its name below --out (its extension names its
 * format); a file that is no image, or one that would be renamed itself, writes nothing by that name.
 */
function writesOwnName(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  const head = Buffer.alloc(SNIFF_BYTES);
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const format = detectFormat(head.subarray(0, readSync(fd, head, 0, SNIFF_BYTES, 0)));
    return format && outputName(basename(path), format) === basename(path) ? path : undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Enough of a file's first bytes to tell its format. */
const SNIFF_BYTES = 32;
