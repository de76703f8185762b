/**
 * The worker pool (piscina) as the server uses it: a bounded queue, and a time limit per task that
 * counts from when a worker starts it (a task past it is aborted and its worker replaced). A task's
 * promise settles only once no worker can touch its bytes any more: after a timed-out task, once the
 * terminated worker has exited. A worker whose memory after a task passed `memoryLimitBytes`
 * (src/pool/memory.ts) gets no further task and is replaced as soon as it is idle, so that memory a
 * hostile file made a worker take is given back whatever the reader did with it.
 */
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';

type PiscinaOptions = NonNullable<ConstructorParameters<typeof Piscina>[0]>;
type Balancer = NonNullable<PiscinaOptions['loadBalancer']>;
type PiscinaWorker = Parameters<Balancer>[1][number];
import type { Config } from '../config.js';
import { OptmarkError } from '../errors.js';
import type { TransferShare } from '../transfer/index.js';
import { TaskStarts } from './starts.js';
import type { Posted, Task, TaskResult, WorkerInit } from './tasks.js';

export interface PoolOptions {
  size: number;
  queueLength: number;
  taskTimeoutMs: number;
  /** A worker reporting more memory than this after a task is replaced (undefined: never). */
  memoryLimitBytes?: number | undefined;
  init: WorkerInit;
}

/** Every worker busy and the queue full: 503. */
export class PoolOverloadedError extends OptmarkError {
  constructor(message?: string) {
    super('overloaded', message);
  }
}

/** The task ran past its time limit (counted from its start), so its worker was replaced: 422. */
export class TaskTimeoutError extends OptmarkError {
  constructor() {
    super('processing_timeout', 'Processing did not finish within the time limit.');
  }
}

/** The caller gave up on the task (its signal aborted). */
export class TaskCancelledError extends OptmarkError {
  constructor() {
    super('overloaded', 'The request was cancelled.');
  }
}

/** What every worker needs from the configuration. */
export function workerInitFrom(config: Config, transfer?: TransferShare): WorkerInit {
  return {
    dataDir: config.dataDir,
    maxUploadBytes: config.maxUploadBytes,
    maxPixels: config.maxPixels,
    signingKeyFile: config.signingKeyFile,
    fingerprintSecretFile: config.fingerprintSecretFile,
    fingerprintDetect: config.fingerprintDetect,
    fingerprintTimeoutMs: config.fingerprintTimeoutMs,
    c2paMode: config.c2paMode,
    c2paCertFile: config.c2paCertFile,
    c2paKeyFile: config.c2paKeyFile,
    tdmPolicy: config.tdmPolicy,
    c2paTrainingMining: config.c2paTrainingMining,
    logLevel: config.logLevel,
    transfer,
  };
}

export interface PoolStats {
  threads: number;
  running: number;
  queued: number;
  utilization: number;
  completed: number;
  /** Workers replaced since start because their memory passed the limit. */
  memoryRecycles: number;
  /** The largest memory a live worker reported after its last task (bytes). */
  workerMemoryMaxBytes: number;
}

const WORKER = fileURLToPath(new URL('../../workers/image-worker.js', import.meta.url));

export class ImagePool {
  readonly #piscina: Piscina<Posted, TaskResult>;
  readonly #options: PoolOptions;
  /** Tasks handed to piscina and not settled (running or queued). */
  #pending = 0;
  #seq = 0;
  /** Where workers stamp the tasks they start (./starts.ts). */
  readonly #starts: TaskStarts;
  /** Each live worker thread's exit, by thread id. */
  readonly #exits = new Map<number, Promise<void>>();
  /** Each live worker's memory after its last task, by thread id. */
  readonly #memory = new Map<number, number>();
  /** Workers past their memory limit: given no task, replaced once idle. */
  readonly #retiring = new Set<number>();
  /** piscina's view of each worker (its current usage), as the balancer last saw it. */
  readonly #views = new Map<number, PiscinaWorker>();
  #memoryRecycles = 0;

  constructor(options: PoolOptions) {
    this.#options = options;
    this.#starts = new TaskStarts(options.size + options.queueLength);
    this.#piscina = new Piscina<Posted, TaskResult>({
      filename: WORKER,
      minThreads: options.size,
      maxThreads: options.size,
      // The bound is ours (saturated): piscina's own would only report itself in an error message.
      maxQueue: Number.POSITIVE_INFINITY,
      idleTimeout: 2 ** 31 - 1,
      loadBalancer: (_task, workers) => this.#pick(workers),
      workerData: { ...options.init, starts: this.#starts.buffer } satisfies WorkerInit,
    });
    this.#piscina.on('workerCreate', (info: { id: number }) => {
      const worker = this.#piscina.threads.find((w) => w.threadId === info.id);
      if (worker)
        this.#exits.set(
          info.id,
          new Promise<void>((resolve) => worker.once('exit', () => resolve())).then(() => {
            this.#exits.delete(info.id);
            this.#memory.delete(info.id);
            this.#views.delete(info.id);
            this.#retiring.delete(info.id);
          }),
        );
    });
  }

  /** piscina's balancer: an idle worker that is not retiring (one task per worker, as piscina's default). */
  #pick(workers: PiscinaWorker[]): PiscinaWorker | null {
    let found: PiscinaWorker | null = null;
    for (const w of workers) {
      this.#views.set(w.id, w);
      if (found === null && w.currentUsage === 0 && !this.#retiring.has(w.id)) found = w;
    }
    return found;
  }

  /** Notes a worker's memory after a task; past the limit, it is retired. */
  #noteMemory(threadId: number, bytes: number): void {
    this.#memory.set(threadId, bytes);
    const limit = this.#options.memoryLimitBytes;
    if (limit !== undefined && bytes > limit && !this.#retiring.has(threadId)) {
      this.#retiring.add(threadId);
      this.#memoryRecycles++;
    }
  }

  /** Terminates the retiring workers that are idle; piscina starts their replacements. */
  #replaceRetired(): void {
    for (const id of this.#retiring) {
      const view = this.#views.get(id);
      if (view !== undefined && view.currentUsage > 0) continue;
      const worker = this.#piscina.threads.find((w) => w.threadId === id);
      if (worker) void worker.terminate();
      else this.#retiring.delete(id);
    }
  }

  /** True when a new task would be refused: every worker busy and the queue at its bound. */
  get saturated(): boolean {
    return this.#pending >= this.#options.size + this.#options.queueLength;
  }

  /** The worker threads themselves (for heap snapshots in the leak test; nothing else should drive them). */
  get threads(): readonly Worker[] {
    return this.#piscina.threads;
  }

  get stats(): PoolStats {
    return {
      threads: this.#piscina.threads.length,
      running: Math.min(this.#pending, this.#options.size),
      queued: this.#piscina.queueSize,
      utilization: this.#piscina.utilization,
      completed: this.#piscina.completed,
      memoryRecycles: this.#memoryRecycles,
      workerMemoryMaxBytes: Math.max(0, ...this.#memory.values()),
    };
  }

  /**
   * Runs a task. A `mark` task's input buffer moves to the worker (the caller must not touch it
   * afterwards). Rejects with PoolOverloadedError when the queue is full, TaskTimeoutError past the time
   * limit, TaskCancelledError when `signal` aborts; a rejection for a task that had started comes only
   * once its worker has exited.
   */
  async run(task: Task, signal?: AbortSignal): Promise<TaskResult> {
    if (this.saturated) throw new PoolOverloadedError();
    const token = ++this.#seq;
    const deadline = new AbortController();
    const limit = this.#options.taskTimeoutMs;
    // The timer looks at the task's stamp: not started yet, it looks again a whole limit later (the task
    // cannot run out of time before then); started, it fires when the limit from the start has passed.
    const check = (): void => {
      const started = this.#starts.started(token);
      const left = started ? started.at + limit - Date.now() : limit;
      if (started && left <= 0) deadline.abort();
      else timer = setTimeout(check, left);
    };
    let timer: NodeJS.Timeout | undefined = setTimeout(check, limit);
    const abort = signal ? AbortSignal.any([deadline.signal, signal]) : deadline.signal;
    this.#pending++;
    try {
      const transferList = task.kind === 'mark' ? [task.input.buffer as ArrayBuffer] : [];
      const result = await this.#piscina.run({ ...task, token }, { transferList, signal: abort });
      const threadId = this.#starts.started(token)?.threadId;
      if (threadId !== undefined && result.memoryBytes !== undefined) this.#noteMemory(threadId, result.memoryBytes);
      return result;
    } catch (err) {
      const aborted = deadline.signal.aborted || signal?.aborted;
      const threadId = this.#starts.started(token)?.threadId;
      if (aborted && threadId !== undefined) await this.#exits.get(threadId);
      if (deadline.signal.aborted) throw new TaskTimeoutError();
      if (signal?.aborted) throw new TaskCancelledError();
      throw err;
    } finally {
      clearTimeout(timer);
      this.#pending--;
      if (this.#retiring.size > 0) this.#replaceRetired();
    }
  }

  /**
   * Starts every worker and warms its hot paths; resolves when each has answered once. Tasks run
   * concurrently, so piscina spreads them across the (idle) workers.
   */
  async warmUp(): Promise<number> {
    const seen = new Set<number>();
    for (let round = 0; round < 4 && seen.size < this.#options.size; round++) {
      const results = await Promise.all(Array.from({ length: this.#options.size }, () => this.#piscina.run({ kind: 'warmup' })));
      for (const r of results) if (r.ok && r.kind === 'warm') seen.add(r.threadId);
    }
    return seen.size;
  }

  async close(): Promise<void> {
    await this.#piscina.close();
  }
}
