/**
 * The service's composition root: configuration, store, worker pool, HTTP server, shutdown.
 */
import { mkdirSync } from 'node:fs';
import type { Config } from './config.js';
import { checkPortFree } from './http/port.js';
import { HttpServer } from './http/server.js';
import { loadUws } from './http/uws.js';
import { createLogger } from './log.js';
import { ImagePool, workerInitFrom } from './pool/pool.js';
import { Store } from './store/index.js';

export interface Service {
  port: number;
  stop(): Promise<void>;
}

export async function startService(config: Config, announce: (text: string) => void): Promise<Service> {
  const log = createLogger(config.logLevel, { service: 'optmark' });
  const { uws, transport } = loadUws(config.allowUwsFallback);
  if (transport !== 'uws-native') log.warn({ transport }, 'running on the slow uWebSockets.js JS fallback (OPTMARK_ALLOW_UWS_FALLBACK=1)');

  // Before the slow parts: a port another process listens on stops the start at once, naming it.
  if (!config.reusePort) await checkPortFree(config.host, config.port);

  mkdirSync(config.dataDir, { recursive: true });
  const store = Store.open({
    dataDir: config.dataDir,
    defaultProtectLimit: config.defaultProtectLimit,
    defaultVerifyLimit: config.defaultVerifyLimit,
  });
  // Checkpoint syncs stall whatever thread commits; keep them off the event loop.
  store.startBackgroundCheckpoints({ onError: (err) => log.error({ err }, 'store checkpointer failed; the event loop checkpoints again') });
  if (config.bootstrap) {
    const boot = store.bootstrapIfEmpty();
    if (boot) {
      // Shown once, on the terminal, never in the structured log.
      announce(
        `\nCreated account "${boot.account.name}" (plan ${boot.account.plan}) with this API key. It is shown only now:\n\n  ${boot.key}\n\n` +
          `Try: curl -H "Authorization: Bearer ${boot.key}" -F image=@photo.jpg http://localhost:${config.port}/api/v1/protect\n\n`,
      );
    }
  }

  const pool = new ImagePool({
    size: config.poolSize,
    queueLength: config.queueLength,
    taskTimeoutMs: config.taskTimeoutMs,
    init: workerInitFrom(config),
    arenaBytes: config.maxInflightBytes,
  });

  const warmed = await pool.warmUp();
  log.debug({ workers: warmed }, 'worker pool warm');

  const server = new HttpServer({
    uws,
    transport,
    store,
    pool,
    log,
    host: config.host,
    port: config.port,
    reusePort: config.reusePort,
    maxUploadBytes: config.maxUploadBytes,
    warmArenaBytes: config.warmInflightBytes,
    poolSize: config.poolSize,
  });
  let port: number;
  try {
    port = await server.listen();
  } catch (err) {
    // Taken since the check (or refused): leave nothing running, so the process can exit.
    await pool.close();
    await store.stopBackgroundCheckpoints();
    store.close();
    throw err;
  }
  log.info({ host: config.host, port, transport, pool: config.poolSize, queue: config.queueLength, dataDir: config.dataDir }, 'listening');

  let stopping: Promise<void> | undefined;
  return {
    port,
    stop: () =>
      (stopping ??= (async () => {
        log.info({ timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
        const { unfinished } = await server.shutdown(config.shutdownTimeoutMs);
        if (unfinished > 0) log.warn({ unfinished }, 'shutdown deadline passed with requests in flight');
        await pool.close();
        await store.stopBackgroundCheckpoints();
        store.close();
        log.info('stopped');
        log.flush();
      })()),
  };
}
