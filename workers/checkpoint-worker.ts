/**
 * The store's checkpointer (src/store/checkpoints.ts): its own SQLite connection on the server's
 * database file, running a PASSIVE checkpoint every `intervalMs`. A PASSIVE checkpoint never takes the
 * write lock, so the event loop's commits never wait for it; its fsyncs block this thread only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointReport, CheckpointerInit } from '../src/store/checkpoints.js';

const init = workerData as CheckpointerInit;
const port = parentPort!;
const db = new Database(init.file, { fileMustExist: true });

const timer = setInterval(() => {
  const started = performance.now();
  const [row] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
  const report: CheckpointReport = { ms: performance.now() - started, walFrames: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 };
  port.postMessage(report);
}, init.intervalMs);

port.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  db.close();
  port.close();
});
