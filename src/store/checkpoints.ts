/**
 * WAL checkpoints off the event loop, for the server's store connection.
 *
 * SQLite checkpoints the WAL inside the commit that takes it past `wal_autocheckpoint` pages (1000 by
 * default), on the committing thread. In the server that thread is the event loop, and with
 * synchronous=NORMAL a checkpoint syncs the WAL and then the database file: 8-12 ms on the VM this was
 * measured on, more when its disk is busy. Every request in flight waited that long, once every ~1000
 * requests (a protect or verify writes about one WAL page).
 *
 * So a worker thread (workers/checkpoint-worker.ts) with its own connection runs a PASSIVE checkpoint
 * every second. PASSIVE never takes the write lock: the commits on the event loop go on while it copies
 * pages and syncs. What it cannot do under steady load is restart the WAL: SQLite rewinds the WAL only
 * when a writer starts while every frame in it has been copied, and commits keep arriving during the
 * checkpoint. So the server's connection keeps a checkpoint of its own as a bound on the WAL's size,
 * 16 times further apart (16384 pages, 64 MiB): those are the only syncs left on the event loop, and
 * they find the WAL already synced up to the last second. When the server is idle for a second the
 * WAL rewinds by itself.
 *
 * Durability gains too: the WAL is synced every second, so an OS crash or power loss drops at most the
 * last second of counter updates, not the last 1000 pages. If the checkpointer fails, the connection
 * goes back to SQLite's default of checkpointing every 1000 pages itself.
 */
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Db } from './db.js';

/** What the checkpointer thread is started with. */
export interface CheckpointerInit {
  file: string;
  intervalMs: number;
}

/** One checkpoint, as the thread reports it. */
export interface CheckpointReport {
  ms: number;
  /** Frames in the WAL and how many of them are in the database file now. */
  walFrames: number;
  checkpointed: number;
}

export interface CheckpointStats {
  /** The checkpointer is running (false after a failure or stop). */
  running: boolean;
  runs: number;
  lastMs: number;
  maxMs: number;
  walFrames: number;
  failures: number;
}

/** SQLite's default `wal_autocheckpoint`: what the connection goes back to without the checkpointer. */
export const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;
/** The connection's own checkpoint while the checkpointer runs: a bound on the WAL, not the routine. */
export const BOUND_AUTOCHECKPOINT_PAGES = 16384;
export const CHECKPOINT_INTERVAL_MS = 1000;
/** How long stop() waits for a checkpoint in progress before terminating the thread. */
const STOP_TIMEOUT_MS = 5000;

const WORKER = fileURLToPath(new URL('../../workers/checkpoint-worker.js', import.meta.url));

export class BackgroundCheckpoints {
  readonly #db: Db;
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  #stopping = false;
  readonly #stats: CheckpointStats = { running: true, runs: 0, lastMs: 0, maxMs: 0, walFrames: 0, failures: 0 };

  /** Starts checkpointing `file`, whose connection on this thread is `db`; `onError` hears of a failure. */
  constructor(db: Db, file: string, options: { intervalMs?: number | undefined; onError?: ((err: Error) => void) | undefined } = {}) {
    this.#db = db;
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    db.pragma(`wal_autocheckpoint = ${BOUND_AUTOCHECKPOINT_PAGES}`);
    // The WAL file shrinks back to this when it rewinds (a bound kept by the line above anyway).
    db.pragma(`journal_size_limit = ${BOUND_AUTOCHECKPOINT_PAGES * (pageSize + 24) + 32}`);
    const init: CheckpointerInit = { file, intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS };
    this.#worker = new Worker(WORKER, { workerData: init });
    // Never what keeps a process alive: the server's sockets do, and stop() is awaited at shutdown.
    this.#worker.unref();
    this.#worker.on('message', (r: CheckpointReport) => {
      const s = this.#stats;
      s.runs++;
      s.lastMs = r.ms;
      s.maxMs = Math.max(s.maxMs, r.ms);
      s.walFrames = r.walFrames;
    });
    this.#worker.on('error', (err) => {
      this.#stats.failures++;
      options.onError?.(err);
    });
    this.#exited = new Promise((resolve) => {
      this.#worker.once('exit', () => {
        this.#stats.running = false;
        // Stopped or failed: the connection checkpoints itself again, as SQLite does by default.
        if (this.#db.open) this.#db.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
        if (!this.#stopping && this.#stats.failures === 0) options.onError?.(new Error('the store checkpointer stopped'));
        resolve();
      });
    });
  }

  get stats(): CheckpointStats {
    return { ...this.#stats };
  }

  /** Stops after the checkpoint in progress (if any); the connection checkpoints itself again. */
  async stop(): Promise<void> {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#worker.postMessage('stop');
      const timer = setTimeout(() => void this.#worker.terminate(), STOP_TIMEOUT_MS);
      void this.#exited.then(() => clearTimeout(timer));
    }
    await this.#exited;
  }
}
