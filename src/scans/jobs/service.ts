/**
 * Scans in `optmark serve` (src/main.ts): the runner over the server's store, pool and settings, and
 * what the HTTP routes need (the settings, the clock, a nudge to the runner when a scan is created).
 */
import type { Config } from '../../config.js';
import type { ScanRoutes } from '../../http/scans.js';
import type { Metrics } from '../../http/metrics.js';
import type { Logger } from '../../log.js';
import type { ImagePool } from '../../pool/pool.js';
import type { Store } from '../../store/index.js';
import type { Transfer } from '../../transfer/index.js';
import { DEFAULT_SCAN_LIMITS } from '../limits.js';
import type { ScanLimits } from '../types.js';
import { ScanRunner } from './runner.js';
import { poolVerify } from './verify.js';

export interface ScanService {
  routes: ScanRoutes;
  /** Starts the runner (once the server listens) with the server's metrics. */
  start(metrics: Metrics): void;
  stop(): Promise<void>;
}

export function scanLimitsOf(config: Config): ScanLimits {
  return {
    ...DEFAULT_SCAN_LIMITS,
    maxImages: config.scanMaxImages,
    maxBytes: config.scanMaxBytes,
    maxWallMs: config.scanMaxWallMs,
    maxImageBytes: config.scanMaxImageBytes,
    maxRedirects: config.scanMaxRedirects,
    perHostConcurrency: config.scanPerHostConcurrency,
    perHostDelayMs: config.scanPerHostDelayMs,
  };
}

export function scanService(config: Config, deps: { store: Store; pool: ImagePool; transfer: Transfer; log: Logger }): ScanService {
  const now = (): number => Date.now() + config.scanClockOffsetMs;
  let runner: ScanRunner | undefined;
  return {
    routes: {
      scanDailyLimit: config.scanDailyLimit,
      scanServiceDailyLimit: config.scanServiceDailyLimit,
      scanAllowLocal: config.scanAllowLocal,
      now,
      created: () => runner?.poke(),
    },
    start(metrics) {
      metrics.watchScans(() => deps.store.scans.stateCounts());
      runner = new ScanRunner({
        store: deps.store,
        log: deps.log,
        verify: poolVerify(deps.pool, deps.transfer),
        limits: scanLimitsOf(config),
        serviceDailyLimit: config.scanServiceDailyLimit,
        allowNetworks: config.scanAllowNetworks,
        allowLocal: config.scanAllowLocal,
        // Half the workers at most, and none while requests wait for one: protect and verify go first.
        width: Math.max(1, Math.floor(config.poolSize / 2)),
        busy: () => deps.pool.stats.queued > 0 || deps.pool.saturated,
        now,
        onItems: (n) => metrics.scanItems.inc(n),
        onFailed: (code) => metrics.scanFailures.inc({ code }),
      });
      runner.start();
    },
    stop: async () => runner?.stop(),
  };
}
