/**
 * The service's composition root: configuration, store, request memory, worker pool, HTTP server,
 * shutdown.
 */
import { join } from 'node:path';
import { loadC2paIdentity } from './c2pa/identity.js';
import type { Config } from './config.js';
import { checkPortFree } from './http/port.js';
import { HttpServer } from './http/server.js';
import { scanService } from './scans/jobs/service.js';
import { loadUws } from './http/uws.js';
import { BOOTSTRAP_KEY_FILE, secureDataDir } from './datadir.js';
import { createLogger } from './log.js';
import { loadingNamed, loadNamedFiles } from './named-files.js';
import { nativeState, setNativeLog } from './native/index.js';
import { ImagePool, workerInitFrom } from './pool/pool.js';
import { PublicKeySync } from './provenance/shared.js';
import { writeKeyFile } from './secrets/files.js';
import { withSharedSecrets } from './secrets/shared.js';
import { openStore } from './store/index.js';
import { Transfer } from './transfer/index.js';
import { openVault } from './vault/start.js';

export interface Service {
  port: number;
  stop(): Promise<void>;
}

/**
 * Starts the service. `announce` shows the start-up key (OPTMARK_BOOTSTRAP) to a person: pass it only
 * when standard output is a terminal; without it the key is written to a 0600 file in the data directory.
 */
export async function startService(config: Config, announce: ((text: string) => void) | undefined): Promise<Service> {
  const log = createLogger(config.logLevel, { service: 'optmark' });
  const { uws, transport } = loadUws(config.allowUwsFallback);
  if (transport !== 'uws-native') log.warn({ transport }, 'running on the slow uWebSockets.js JS fallback (OPTMARK_ALLOW_UWS_FALLBACK=1)');
  setNativeLog((fields, message) => log.warn(fields, message));
  const native = nativeState();

  // Before the slow parts: a port another process listens on stops the start at once, naming it.
  if (!config.reusePort) await checkPortFree(config.host, config.port);

  // Nothing in the data directory is for other local users: 0700, the store's files 0600, also when an
  // older version left them readable.
  const modes = secureDataDir(config.dataDir);
  for (const c of modes.changes) log.warn({ path: c.path, from: c.from, to: c.to }, 'data file was readable by other users; its mode is tightened');
  for (const p of modes.problems) log.warn({ path: p.path, err: p.error }, 'cannot tighten the mode of a data file; other local users may read it');
  // The C2PA signing identity (OPTMARK_C2PA=update): created at first start in the data directory
  // unless configured; a configured one that does not load stops the start here, not at the first file.
  if (config.c2paMode === 'update') {
    const { c2paCertFile: certFile, c2paKeyFile: keyFile } = config;
    const identity = await loadingNamed('OPTMARK_C2PA_CERT_FILE', certFile, loadC2paIdentity({ dataDir: config.dataDir, certFile, keyFile }));
    log.info({ subject: identity.subject, alg: identity.alg, generated: identity.generated }, 'C2PA signing identity');
  }
  // The same for the signing key and the fingerprint secret when the operator names their files.
  await loadNamedFiles(config);
  const store = await openStore({
    dataDir: config.dataDir,
    defaultProtectLimit: config.defaultProtectLimit,
    defaultVerifyLimit: config.defaultVerifyLimit,
    databaseUrl: config.databaseUrl,
    storeTimeoutMs: config.storeTimeoutMs,
    // Counter writes are acknowledged before PostgreSQL's WAL flush (docs/scaling.md, "Durability").
    synchronousCommit: false,
  });
  log.info({ engine: store.engine, location: store.location, instance: store.instanceId }, 'store open');
  // SQLite: checkpoint syncs stall whatever thread commits, so they run on a thread of their own. Both
  // engines: this instance's lease, the reconciliation of dead instances' reservations (now, before the
  // first request, and every second), batched last-used writes.
  await store.startBackground({
    onError: (err, what) =>
      log.error({ err, what }, what === 'checkpoints' ? 'store checkpointer failed; the event loop checkpoints again' : 'store background work failed'),
    onReconciled: (units) => log.warn({ units }, 'gave back units held by an instance that is gone'),
  });
  // PostgreSQL: every instance embeds and detects with the store's fingerprint key, and verifies the
  // provenance tags of every instance (public keys kept in step through the store).
  const layers = await withSharedSecrets(config, store);
  const keySync = new PublicKeySync(store, config.dataDir, (err) => log.error({ err }, 'provenance public keys: sync with the store failed'));
  await keySync.start();
  // Shows the start-up key once (OPTMARK_BOOTSTRAP), with a command that reaches this server. With
  // OPTMARK_PORT=0 the port is known only once it listens: the key is shown then (and, should the listen
  // fail, with the configured port, so that it is not lost).
  let welcome: ((port: number) => Promise<void>) | undefined;
  if (config.bootstrap) {
    const boot = await store.bootstrapIfEmpty();
    if (boot) {
      welcome = async (port) => {
        const text =
          `\nCreated account "${boot.account.name}" (plan ${boot.account.plan}) with this API key. It is shown only now:\n\n  ${boot.key}\n\n` +
          `Try (writes photo.protected.jpg): curl -H "Authorization: Bearer ${boot.key}" -H "Accept: image/*" -F image=@photo.jpg \\\n` +
          `  -o photo.protected.jpg ${serverUrl(config.host, port)}/api/v1/protect\n\n`;
        // Shown once, on a terminal, never in the structured log. Without a terminal (systemd, docker, a
        // pipe: stdout is where the JSON log goes, and a log collector keeps it) it goes to a file only
        // the service's user can read, and the log says where.
        if (announce) announce(text);
        else {
          const file = join(config.dataDir, BOOTSTRAP_KEY_FILE);
          await writeKeyFile(file, text, { how: 'replace' });
          log.warn({ file, account: boot.account.name }, 'created the first account; its API key is in this file (mode 0600): read it, then delete the file');
        }
      };
      if (config.port !== 0) {
        await welcome(config.port);
        welcome = undefined;
      }
    }
  }

  const transfer = new Transfer({ capacityBytes: config.maxInflightBytes, warmBytes: config.warmInflightBytes });
  const pool = new ImagePool({
    size: config.poolSize,
    queueLength: config.queueLength,
    taskTimeoutMs: config.taskTimeoutMs,
    memoryLimitBytes: config.workerMemoryLimitBytes,
    init: workerInitFrom(layers, transfer.share),
  });

  const warmed = await pool.warmUp();
  log.debug({ workers: warmed }, 'worker pool warm');
  const vault = await openVault(config, store, pool, log);

  const scans = scanService(config, { store, pool, transfer, log });
  const server = new HttpServer({
    scans: scans.routes,
    uws,
    transport,
    store,
    pool,
    transfer,
    log,
    host: config.host,
    port: config.port,
    reusePort: config.reusePort,
    maxUploadBytes: config.maxUploadBytes,
    poolSize: config.poolSize,
    vault: vault.vault,
    uploads: {
      perAccountBytes: config.maxArrivingBytesPerAccount,
      perAddressBytes: config.maxArrivingBytesPerAddress,
      minBytesPerSecond: config.minUploadBytesPerSecond,
    },
  });
  let port: number;
  try {
    port = await server.listen();
  } catch (err) {
    await welcome?.(config.port);
    // Taken since the check (or refused): leave nothing running, so the process can exit.
    vault.stop();
    await pool.close();
    transfer.stop();
    await keySync.stop();
    await store.stopBackground();
    await store.close();
    throw err;
  }
  scans.start(server.metrics);
  server.metrics.watchVault(vault.reconciled);
  log.info({ host: config.host, port, transport, native, pool: config.poolSize, queue: config.queueLength, dataDir: config.dataDir }, 'listening');
  await welcome?.(port);

  let stopping: Promise<void> | undefined;
  return {
    port,
    stop: () =>
      (stopping ??= (async () => {
        log.info({ timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
        const { unfinished } = await server.shutdown(config.shutdownTimeoutMs);
        if (unfinished > 0) log.warn({ unfinished }, 'shutdown deadline passed with requests in flight');
        vault.stop();
        await scans.stop();
        await pool.close();
        transfer.stop();
        await keySync.stop();
        await store.stopBackground();
        await store.close();
        log.info('stopped');
        log.flush();
      })()),
  };
}

/** The base URL a client on this machine reaches the server at: localhost for a wildcard or loopback address. */
export function serverUrl(host: string, port: number): string {
  const local = ['0.0.0.0', '::', '127.0.0.1', '::1', 'localhost', ''].includes(host);
  const name = local ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}
