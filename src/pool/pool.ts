/**
 * The worker pool (piscina) as the server uses it: bounded queue, a deadline per task (a task past it
 * is aborted and its worker replaced). Request bytes live in a shared arena the workers map once (see
 * arena.ts); the layer path's own buffers are transferred, never copied.
 */
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { Config } from '../config.js';
import { OptmarkError } from '../errors.js';
import type { Task, TaskResult, WorkerInit } from '../pipeline/tasks.js';
import { Arena } from './arena.js';

export interface PoolOptions {
  size: number;
  queueLength: number;
  taskTimeoutMs: number;
  init: WorkerInit;
  /** Size of the shared arena for request bytes; 0 for a pool whose tasks carry their own buffers. */
  arenaBytes?: number;
}

/** What every worker needs from the configuration. */
export function workerInitFrom(config: Config): WorkerInit {
  return {
    dataDir: config.dataDir,
    maxUploadBytes: config.maxUploadBytes,
    maxPixels: config.maxPixels,
    signingKeyFile: config.signingKeyFile,
    fingerprintSecretFile: config.fingerprintSecretFile,
    fingerprintDetect: config.fingerprintDetect,
  };
}

export interface PoolStats {
  threads: number;
  running: number;
  queued: number;
  utilization: number;
  completed: number;
}

const WORKER = fileURLToPath(new URL('../../workers/image-worker.js', import.meta.url));

export class ImagePool {
  readonly #piscina: Piscina<Task, TaskResult>;
  readonly #options: PoolOptions;
  /** Request bytes in flight (uploads and response bodies), shared with every worker. */
  readonly arena: Arena | undefined;
  #running = 0;

  constructor(options: PoolOptions) {
    this.#options = options;
    this.arena = options.arenaBytes ? new Arena(options.arenaBytes) : undefined;
    this.#piscina = new Piscina<Task, TaskResult>({
      filename: WORKER,
      minThreads: options.size,
      maxThreads: options.size,
      maxQueue: options.queueLength,
      idleTimeout: 2 ** 31 - 1,
      workerData: { ...options.init, arena: this.arena?.buffer },
    });
  }

  /** True when a new task would be refused: every worker busy and the queue at its bound. */
  get saturated(): boolean {
    return this.#piscina.queueSize >= this.#options.queueLength && this.#running >= this.#options.size;
  }

  /** The worker threads themselves (for heap snapshots in the leak test; nothing else should drive them). */
  get threads(): readonly Worker[] {
    return this.#piscina.threads;
  }

  get stats(): PoolStats {
    return {
      threads: this.#piscina.threads.length,
      running: Math.min(this.#running, this.#options.size),
      queued: this.#piscina.queueSize,
      utilization: this.#piscina.utilization,
      completed: this.#piscina.completed,
    };
  }

  /**
   * Runs a task. A `mark` task's input buffer moves to the worker (the caller must not touch it
   * afterwards); arena ranges a task names must stay allocated until the returned promise settles, and
   * after a rejection until the aborted worker is surely gone (see QUARANTINE_MS in the API).
   * Rejects with OptmarkError: `overloaded` when the queue is full, `processing_timeout` past the deadline.
   */
  async run(task: Task, signal?: AbortSignal): Promise<TaskResult> {
    if (this.saturated) throw new OptmarkError('overloaded');
    const deadline = AbortSignal.timeout(this.#options.taskTimeoutMs);
    const abort = signal ? AbortSignal.any([deadline, signal]) : deadline;
    const queuedAhead = this.#piscina.queueSize;
    this.#running++;
    try {
      const transferList = task.kind === 'mark' ? [task.input.buffer as ArrayBuffer] : [];
      return await this.#piscina.run(task, { transferList, signal: abort });
    } catch (err) {
      if (deadline.aborted) {
        // Started at once yet ran out of time: the image is the problem (422). Waited behind others:
        // the server is (503).
        throw new OptmarkError(queuedAhead === 0 ? 'processing_timeout' : 'overloaded', 'Processing did not finish within the time limit.');
      }
      if (signal?.aborted) throw new OptmarkError('overloaded', 'The request was cancelled.');
      if (err instanceof Error && /queue is at limit/i.test(err.message)) throw new OptmarkError('overloaded');
      throw err;
    } finally {
      this.#running--;
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
