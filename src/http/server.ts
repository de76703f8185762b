/**
 * The uWebSockets.js application: API routes, operational endpoints, and orderly shutdown. Handlers
 * here only route; the API exchange lives in api.ts, its body in intake.ts, its quota unit in quota.ts.
 */
import { readFileSync } from 'node:fs';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Logger } from '../log.js';
import { nativeState } from '../native/index.js';
import type { ImagePool } from '../pool/pool.js';
import type { Store } from '../store/index.js';
import type { Transfer } from '../transfer/index.js';
import type { Vault } from '../vault/service.js';
import { Assets } from '../dashboard/assets.js';
import { ReceiptMaker } from '../dashboard/receipts.js';
import { handleApi, type ApiDeps, type InFlight } from './api.js';
import { registerVault } from './vault.js';
import { registerDashboard, verifyWithRecords } from './dashboard.js';
import { withFraming } from './framing.js';
import { Metrics } from './metrics.js';
import { registerScans, type ScanRoutes } from './scans.js';
import { LISTEN_DEFAULT, LISTEN_EXCLUSIVE_PORT, listenFailure } from './port.js';
import { type Exchange, exchangeOf, getAndHead } from './respond.js';
import { type UploadLimits, Uploads } from './intake.js';
import type { Transport, Uws } from './uws.js';

export interface ServerOptions {
  uws: Uws;
  transport: Transport;
  store: Store;
  pool: ImagePool;
  transfer: Transfer;
  log: Logger;
  host: string;
  port: number;
  /** Share the port with other processes (SO_REUSEPORT) instead of refusing a port in use. */
  reusePort?: boolean;
  maxUploadBytes: number;
  /** Worker threads (the dashboard sizes its upload concurrency from it). */
  poolSize?: number;
  /** The Private Vault (its routes are served only with one). */
  vault?: Vault;
  /** Per-client shares of arriving bodies and the upload rate floor (none when absent). */
  uploads?: UploadLimits;
  /** The scans API's settings and clock (./scans.ts); no scan routes without. */
  scans?: ScanRoutes;
}

/**
 * The OpenAPI document: docs/openapi.json, which the build copies to dist/docs/, so the same relative
 * path finds it from the sources and from the build.
 */
const OPENAPI_PATH = new URL('../../docs/openapi.json', import.meta.url);

/** The count of requests in progress, and who waits for it to reach zero. */
class RequestsInFlight implements InFlight {
  count = 0;
  readonly #waiters = new Set<() => void>();

  begin(): void {
    this.count++;
  }

  end(): void {
    if (--this.count > 0) return;
    for (const w of [...this.#waiters]) w();
  }

  /** Resolves true once nothing is in flight, false when `timeoutMs` passes first. */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
        resolve(ok);
      };
      const waiter = (): void => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}

export class HttpServer {
  readonly #app: TemplatedApp;
  readonly #options: ServerOptions;
  readonly metrics: Metrics;
  readonly #inflight = new RequestsInFlight();
  readonly #uploads: Uploads;
  /** The dashboard's PDF receipts, made on a thread of their own. */
  readonly #receipts = new ReceiptMaker();
  #listen: us_listen_socket | undefined;
  #ready = false;
  #openapi: Buffer;
  port = 0;

  constructor(options: ServerOptions) {
    this.#options = options;
    this.#uploads = new Uploads(options.uploads ?? { perAccountBytes: 0, perAddressBytes: 0, minBytesPerSecond: 0 });
    this.metrics = new Metrics(
      () => options.pool.stats,
      () => options.store.stats.checkpoints,
      () => options.transfer.used,
    );
    this.#openapi = readFileSync(OPENAPI_PATH);
    const deps: ApiDeps = {
      store: options.store,
      pool: options.pool,
      transfer: options.transfer,
      metrics: this.metrics,
      log: options.log,
      maxUploadBytes: options.maxUploadBytes,
      inflight: this.#inflight,
      uploads: this.#uploads,
    };
    // Every route checks the request's framing first (./framing.ts); the 400 goes out after the handler
    // returned, so that uWS never dispatches what follows the refused request. The JS fallback runs on
    // node:http, whose parser refuses such requests itself (and has no req.forEach).
    const uwsApp = options.uws.App();
    const app =
      options.transport === 'uws-native'
        ? withFraming(uwsApp, (res, req, fault) => {
            const ex = exchangeOf(res, req, 'other');
            setImmediate(() => this.#observed(ex, ex.error('invalid_request', fault, {}, { closeConnection: true })));
          })
        : uwsApp;
    app.post('/api/v1/protect', (res, req) => handleApi(deps, 'protect', res, req));
    const verify = verifyWithRecords(options.store);
    app.post('/api/v1/verify', (res, req) => handleApi(deps, 'verify', res, req, verify));
    for (const path of ['/api/v1/protect', '/api/v1/verify']) {
      app.any(path, (res, req) => this.#simple(res, req, path, (ex) => ex.error('method_not_allowed', `${path} accepts POST only.`, { Allow: 'POST' })));
    }
    getAndHead(app, '/healthz', (res, req) => this.#simple(res, req, '/healthz', (ex) => ex.json(200, '{"status":"ok"}')));
    getAndHead(app, '/readyz', (res, req) => this.#simple(res, req, '/readyz', (ex) => this.#readyz(ex)));
    getAndHead(app, '/metrics', (res, req) => {
      const ex = exchangeOf(res, req, '/metrics');
      this.metrics.registry.metrics().then(
        (text) => ex.send(200, { 'Content-Type': this.metrics.registry.contentType }, text),
        () => ex.error('internal_error'),
      );
    });
    if (options.vault) registerVault(app, deps, options.vault);
    registerDashboard(app, {
      ...deps,
      assets: Assets.load(),
      receipts: this.#receipts,
      poolSize: options.poolSize ?? options.pool.stats.threads,
      vault: options.vault,
    });
    if (options.scans) registerScans(app, { ...deps, ...options.scans });
    getAndHead(app, '/api/v1/openapi.json', (res, req) =>
      this.#simple(res, req, '/api/v1/openapi.json', (ex) => ex.json(200, this.#openapi, { 'Cache-Control': 'public, max-age=300' })),
    );
    // A known route with another method is 405 with Allow (README: "wrong method"), not "No route".
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/v1/openapi.json']) {
      app.any(path, (res, req) =>
        this.#simple(res, req, path, (ex) => ex.error('method_not_allowed', `${path} accepts GET and HEAD only.`, { Allow: 'GET, HEAD' })),
      );
    }
    app.any('/*', (res, req) =>
      this.#simple(res, req, 'other', (ex) => ex.error('not_found', `No route for ${req.getMethod().toUpperCase()} ${req.getUrl()}.`)),
    );
    this.#app = app;
  }

  /** Answers a request that needs no body; counts it in the metrics. */
  #simple(res: HttpResponse, req: HttpRequest, route: string, answer: (ex: Exchange) => Promise<boolean>): void {
    const ex = exchangeOf(res, req, route);
    this.#observed(ex, answer(ex));
  }

  /** Counts an answered exchange in the metrics once its answer is written. */
  #observed(ex: Exchange, sent: Promise<boolean>): void {
    void sent.then(() => {
      this.metrics.observe(ex.route, ex.status, Number(process.hrtime.bigint() - ex.started) / 1e9, 0, ex.sent);
    });
  }

  #readyz(ex: Exchange): Promise<boolean> {
    const pool = this.#options.pool.stats;
    const body = JSON.stringify({
      status: this.#ready ? 'ready' : 'not ready',
      transport: this.#options.transport,
      pool,
      store: 'ok',
      native: nativeState(),
      inflight: { requests: this.#inflight.count, bytes: this.#options.transfer.used, capacity: this.#options.transfer.capacity },
    });
    return ex.json(this.#ready ? 200 : 503, body);
  }

  /**
   * Starts listening; resolves with the bound port. Rejects with a ListenError naming the port when
   * another process listens on it, unless `reusePort` asks to share it (src/http/port.ts).
   */
  listen(): Promise<number> {
    const { host, port } = this.#options;
    const mode = this.#options.reusePort ? LISTEN_DEFAULT : LISTEN_EXCLUSIVE_PORT;
    // The typings lack the (host, port, options, callback) form the native addon and its fallback accept.
    const listen = this.#app.listen as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
    return new Promise((resolve, reject) => {
      listen.call(this.#app, host, port, mode, (socket) => {
        if (!socket) {
          listenFailure(host, port).then(reject, reject);
          return;
        }
        this.#listen = socket;
        this.port = this.#options.uws.us_socket_local_port(socket);
        this.#ready = true;
        resolve(this.port);
      });
    });
  }

  /** Stops accepting, waits for in-flight requests up to `timeoutMs`, then closes every connection. */
  async shutdown(timeoutMs: number): Promise<{ unfinished: number }> {
    this.#ready = false;
    if (this.#listen) {
      this.#options.uws.us_listen_socket_close(this.#listen);
      this.#listen = undefined;
    }
    await this.#inflight.drained(timeoutMs);
    const unfinished = this.#inflight.count;
    this.#uploads.stop();
    (this.#app as unknown as { close(): void }).close();
    await this.#receipts.close();
    return { unfinished };
  }
}
