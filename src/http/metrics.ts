/** Prometheus metrics (prom-client) of the HTTP service and its worker pool. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { PoolStats } from '../pool/pool.js';
import type { CheckpointStats } from '../store/index.js';
import type { ReconcileReport } from '../vault/service.js';

/** optmark_vault_reconciled_total's `what` label for each total of the reconciler. */
const RECONCILED: readonly [string, keyof ReconcileReport][] = [
  ['expired_reservation', 'expiredReservations'],
  ['orphan_object', 'orphanObjects'],
  ['missing_object', 'missingObjects'],
];

export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'optmark_http_requests_total',
    help: 'HTTP requests answered, by route and status.',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'optmark_http_request_duration_seconds',
    help: 'Time from the request line to the last byte handed to the socket, by route.',
    labelNames: ['route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly bytesIn = new Counter({
    name: 'optmark_http_received_bytes_total',
    help: 'Request body bytes received, by route.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });
  readonly bytesOut = new Counter({
    name: 'optmark_http_sent_bytes_total',
    help: 'Response body bytes sent, by route.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  // Repository scans (docs/scans.md): items this instance wrote, scans failed by code, scans by state.
  readonly scanItems = new Counter({
    name: 'optmark_scan_items_total',
    help: 'Scan items (images examined) this instance wrote.',
    registers: [this.registry],
  });
  readonly scanFailures = new Counter({
    name: 'optmark_scan_failures_total',
    help: 'Scans this instance ended failed, by error code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  #scanStates: (() => Promise<Record<string, number>>) | undefined;
  #vaultReconciled: Readonly<ReconcileReport> | undefined;

  /** Scans queued, paused and running service-wide, read from the store at scrape time. */
  watchScans(states: () => Promise<Record<string, number>>): void {
    this.#scanStates = states;
  }

  /** The vault reconciler's totals since start (src/vault/start.ts), read at scrape time. */
  watchVault(reconciled: Readonly<ReconcileReport>): void {
    this.#vaultReconciled = reconciled;
  }

  constructor(poolStats: () => PoolStats, checkpointStats: () => CheckpointStats | undefined = () => undefined, inflightBytes: () => number = () => 0) {
    collectDefaultMetrics({ register: this.registry, prefix: 'optmark_' });
    const metrics = this;
    new Gauge({
      name: 'optmark_scans',
      help: 'Scans service-wide by state (queued, paused, running).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      async collect() {
        const counts = await metrics.#scanStates?.().catch(() => undefined);
        if (!counts) return;
        for (const state of ['queued', 'paused', 'running']) this.set({ state }, counts[state] ?? 0);
      },
    });
    new Counter({
      name: 'optmark_vault_reconciled_total',
      help: 'What the vault reconciler of this instance removed since start: expired reservations, stored objects no row names, rows whose object was gone.',
      labelNames: ['what'] as const,
      registers: [this.registry],
      collect() {
        const totals = metrics.#vaultReconciled;
        if (!totals) return;
        // The totals only grow: the counter is set to them at each scrape.
        this.reset();
        for (const [what, key] of RECONCILED) this.inc({ what }, totals[key]);
      },
    });
    new Gauge({
      name: 'optmark_inflight_upload_bytes',
      help: 'Request memory in use: uploads and response bodies in flight.',
      registers: [this.registry],
      collect() {
        this.set(inflightBytes());
      },
    });
    // A gauge read at scrape time; left unset while `read` has nothing (no checkpointer started).
    const gauge = <T>(read: () => T | undefined, name: string, help: string, pick: (s: T) => number): void => {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          const s = read();
          if (s !== undefined) this.set(pick(s));
        },
      });
    };
    const stat = (name: string, help: string, pick: (s: PoolStats) => number): void => gauge(poolStats, name, help, pick);
    stat('optmark_pool_threads', 'Worker threads in the pool.', (s) => s.threads);
    stat('optmark_pool_running_tasks', 'Tasks running on workers.', (s) => s.running);
    stat('optmark_pool_queue_depth', 'Tasks waiting for a worker.', (s) => s.queued);
    stat('optmark_pool_utilization_ratio', 'Share of pool capacity used since start (piscina utilization).', (s) => s.utilization);
    stat('optmark_pool_completed_tasks', 'Tasks completed since start.', (s) => s.completed);
    stat(
      'optmark_pool_memory_recycles',
      'Workers replaced since start because their memory passed OPTMARK_WORKER_MEMORY_LIMIT_BYTES.',
      (s) => s.memoryRecycles,
    );
    stat(
      'optmark_pool_worker_memory_max_bytes',
      'Largest memory (JS heap in use + C2PA reader wasm) a live worker reported after its last task.',
      (s) => s.workerMemoryMaxBytes,
    );
    const store = (name: string, help: string, pick: (s: CheckpointStats) => number): void => gauge(checkpointStats, name, help, pick);
    store('optmark_store_checkpointer_running', 'The store checkpointer thread runs (1); 0 = the event loop checkpoints itself.', (s) => (s.running ? 1 : 0));
    store('optmark_store_checkpoints', 'Background WAL checkpoints since start.', (s) => s.runs);
    store('optmark_store_checkpoint_last_seconds', 'Duration of the last background WAL checkpoint.', (s) => s.lastMs / 1000);
    store('optmark_store_checkpoint_max_seconds', 'Longest background WAL checkpoint since start.', (s) => s.maxMs / 1000);
    store('optmark_store_wal_frames', 'Frames in the WAL at the last background checkpoint.', (s) => s.walFrames);
  }

  observe(route: string, status: number, seconds: number, bytesIn: number, bytesOut: number): void {
    this.requests.inc({ route, status: String(status) });
    this.duration.observe({ route }, seconds);
    if (bytesIn > 0) this.bytesIn.inc({ route }, bytesIn);
    if (bytesOut > 0) this.bytesOut.inc({ route }, bytesOut);
  }
}
