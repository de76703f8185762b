// The real server as a child process (`node dist/src/cli.js serve`) on a loopback port, its operator
// CLI on the same data directory, and two HTTP clients: fetch for plain exchanges and a raw node:net
// client whose body can be split, trickled, sent chunked or cut off mid-way. Needs `npm run build`.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { prng } from '../../bench/load/random.js';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const CLI = join(ROOT, 'dist', 'src', 'cli.js');
const READY_TIMEOUT_MS = 60_000;

/** Throws the message that tells a developer to build first. */
export function requireBuild(): void {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` first');
}

/** A pool with its request memory, and one API request through both, as the server makes it. */
export interface TestPool {
  pool: import('../../src/pool/pool.js').ImagePool;
  /** Admits, receives, runs and answers one request as the API does; the answer's body. */
  request(kind: 'protect' | 'verify', form: { body: Buffer; contentType: string }): Promise<Buffer>;
  close(): Promise<void>;
}

/**
 * The image pool the server runs (from dist/, so its worker is the built one): one worker, 8 MiB of
 * request memory, no signing key or fingerprint secret, on the given data directory.
 */
export async function testPool(dataDir: string, options: { taskTimeoutMs?: number; memoryLimitBytes?: number } = {}): Promise<TestPool> {
  requireBuild();
  const dist = (...p: string[]): string => pathToFileURL(join(ROOT, 'dist', 'src', ...p)).href;
  const { ImagePool, workerInitFrom } = (await import(dist('pool', 'pool.js'))) as typeof import('../../src/pool/pool.js');
  const { Transfer } = (await import(dist('transfer', 'index.js'))) as typeof import('../../src/transfer/index.js');
  const { loadConfig } = (await import(dist('config.js'))) as typeof import('../../src/config.js');
  const transfer = new Transfer({ capacityBytes: 8 * 1024 * 1024, warmBytes: 0 });
  const config = loadConfig({
    OPTMARK_DATA_DIR: dataDir,
    OPTMARK_MAX_UPLOAD_BYTES: String(1024 * 1024),
    OPTMARK_MAX_INFLIGHT_BYTES: String(8 * 1024 * 1024),
    OPTMARK_FINGERPRINT_DETECT: 'off',
    OPTMARK_LOG_LEVEL: 'warn',
  });
  const pool = new ImagePool({
    size: 1,
    queueLength: 4,
    taskTimeoutMs: options.taskTimeoutMs ?? 60_000,
    memoryLimitBytes: options.memoryLimitBytes,
    init: { ...workerInitFrom(config, transfer.share), maxUploadBytes: 4 * 1024 * 1024 },
  });
  return {
    pool,
    async request(kind, form) {
      const lease = transfer.admit(form.body.length, kind === 'protect');
      if (!lease) throw new Error("no room in the test pool's request memory");
      try {
        const chunk = form.body.buffer.slice(form.body.byteOffset, form.body.byteOffset + form.body.length) as ArrayBuffer;
        const written = lease.write(chunk);
        if (written !== 'ok' && written !== 'grown') throw new Error(`the lease refused the body (${written})`);
        const { input, output } = lease.seal();
        const r = await pool.run(kind === 'protect' ? { kind, input, output, contentType: form.contentType } : { kind, input, contentType: form.contentType });
        if (!r.ok || r.kind !== 'answer') throw new Error(`${kind} failed: ${JSON.stringify(r)}`);
        return Buffer.from(lease.answer(r.answer));
      } finally {
        lease.release();
      }
    },
    close: () => pool.close(),
  };
}

/** A port that was free a moment ago (the server is started on it right away; start() retries a clash). */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/** The environment of a child: this process's, minus every optmark and uWS setting a developer may have exported. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OPTMARK_') && !k.startsWith('UWS_')) env[k] = v;
  return { ...env, ...extra };
}

export interface CliResult {
  status: number;
  stdout: string;
  stderr: string;
}

export interface ServerOptions {
  /** Extra variables (OPTMARK_POOL_SIZE, ...); the helper sets port, host, data dir, bootstrap and log level. */
  env?: Record<string, string>;
  /** Reuse a data directory (a restart); a fresh temporary one otherwise. */
  dataDir?: string;
}

export interface Readiness {
  status: string;
  transport: string;
  pool: { threads: number; running: number; queued: number; utilization: number; completed: number };
  store: string;
  inflight: { requests: number; bytes: number };
}

/** Waits until `check` returns a value other than undefined; polls, fails after `timeoutMs` (a hang detector, not a measurement). */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** One server process and its data directory. */
export class TestServer {
  port = 0;
  proc: ChildProcess | undefined;
  /** Everything the process wrote to stdout and stderr, across restarts. */
  output = '';
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> = Promise.resolve({ code: null, signal: null });
  readonly #ownsDir: boolean;

  private constructor(
    readonly dataDir: string,
    readonly env: Record<string, string>,
    ownsDir: boolean,
  ) {
    this.#ownsDir = ownsDir;
  }

  /** Starts a server and waits until /readyz answers 200. */
  static async start(options: ServerOptions = {}): Promise<TestServer> {
    requireBuild();
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'optmark-http-'));
    const server = new TestServer(dataDir, options.env ?? {}, options.dataDir === undefined);
    try {
      await server.restart();
    } catch (err) {
      await server.dispose();
      throw err;
    }
    return server;
  }

  /**
   * Runs `serve` without waiting for readiness: for starts that are meant to fail. A start that succeeds
   * anyway is killed once it logs that it listens (code null, the log in `output`), not left running.
   */
  static async spawnOnce(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
    requireBuild();
    const dataDir = mkdtempSync(join(tmpdir(), 'optmark-http-'));
    try {
      const server = new TestServer(dataDir, env, true);
      server.#spawn(await freePort());
      const proc = server.proc!;
      proc.stdout!.on('data', () => {
        if (server.output.includes('"msg":"listening"')) proc.kill('SIGKILL');
      });
      const { code } = await server.exited;
      return { code, output: server.output };
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  #spawn(port: number): void {
    this.port = port;
    const env = childEnv({
      OPTMARK_HOST: '127.0.0.1',
      OPTMARK_PORT: String(port),
      OPTMARK_DATA_DIR: this.dataDir,
      OPTMARK_BOOTSTRAP: 'off',
      OPTMARK_LOG_LEVEL: 'info',
      ...this.env,
    });
    const proc = spawn(process.execPath, [CLI, 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    proc.stdout.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    proc.stderr.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    this.exited = new Promise((res) => proc.on('close', (code, signal) => res({ code, signal })));
  }

  /** (Re)starts the process on the same data directory, on a new free port; resolves when ready. */
  async restart(): Promise<void> {
    if (this.running) throw new Error('the server is still running');
    for (let attempt = 0; ; attempt++) {
      const from = this.output.length;
      this.#spawn(await freePort());
      const proc = this.proc!;
      let gone = false;
      void this.exited.then(() => (gone = true));
      try {
        await waitFor(
          'the server to become ready',
          async () => {
            if (gone) throw new Error(`server exited before ready:\n${this.output.slice(from)}`);
            return (await this.fetchStatus('/readyz')) === 200 ? true : undefined;
          },
          READY_TIMEOUT_MS,
        );
        return;
      } catch (err) {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
        await this.exited;
        // Another process took the port between freePort() and listen(): try another one. Or dist/ was
        // being rewritten by a concurrent `npm run build` (a half-written module): try again once it is whole.
        const why = this.output.slice(from);
        if (attempt < 3 && /cannot listen|SyntaxError|ERR_MODULE_NOT_FOUND/.test(why)) {
          if (!/cannot listen/.test(why)) await new Promise((r) => setTimeout(r, 2000));
          continue;
        }
        throw err;
      }
    }
  }

  async fetchStatus(path: string): Promise<number> {
    try {
      const r = await fetch(this.url(path));
      await r.arrayBuffer();
      return r.status;
    } catch {
      return 0;
    }
  }

  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async readyz(): Promise<Readiness> {
    const r = await fetch(this.url('/readyz'));
    return (await r.json()) as Readiness;
  }

  /** Polls /readyz until `check` holds for its body. */
  async readyzUntil(what: string, check: (r: Readiness) => boolean): Promise<Readiness> {
    return waitFor(what, async () => {
      const r = await this.readyz();
      return check(r) ? r : undefined;
    });
  }

  /** Waits until no API request is in flight and no upload byte is held. */
  settled(): Promise<Readiness> {
    return this.readyzUntil('in-flight requests and bytes to return to 0', (r) => r.inflight.requests === 0 && r.inflight.bytes === 0);
  }

  /** Sends a signal and waits for the process to end. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) this.proc!.kill(signal);
    return this.exited;
  }

  /** Stops the process (SIGKILL if it does not stop within a while) and removes the data directory. */
  async dispose(): Promise<void> {
    if (this.running) {
      const timer = setTimeout(() => this.proc?.kill('SIGKILL'), 15_000);
      await this.stop();
      clearTimeout(timer);
    }
    if (this.#ownsDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Runs an operator command on this server's data directory. */
  cli(...args: string[]): Promise<CliResult> {
    return new Promise((res) => {
      execFile(process.execPath, [CLI, ...args], { cwd: ROOT, env: childEnv({ OPTMARK_DATA_DIR: this.dataDir, ...this.env }) }, (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        res({ status, stdout, stderr });
      });
    });
  }

  async cliOk(...args: string[]): Promise<string> {
    const r = await this.cli(...args);
    if (r.status !== 0) throw new Error(`optmark ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  }

  /** Creates an account (fresh name) with optional limits and issues one key for it. */
  async account(options: { plan?: string; protect?: number; verify?: number } = {}): Promise<{ name: string; key: string }> {
    const name = `acct-${Math.random().toString(36).slice(2, 10)}`;
    await this.cliOk('account', 'create', name, '--plan', options.plan ?? 'pro');
    const limits: string[] = [];
    if (options.protect !== undefined) limits.push('--protect', String(options.protect));
    if (options.verify !== undefined) limits.push('--verify', String(options.verify));
    if (limits.length > 0) await this.cliOk('account', 'set-limits', name, ...limits);
    const lines = (await this.cliOk('key', 'issue', name)).trim().split('\n');
    return { name, key: lines[lines.length - 1]!.trim() };
  }

  /** `usage <account> --json`: the month's counters. */
  async usage(account: string): Promise<{ protect: { used: number; limit: number }; verify: { used: number; limit: number } }> {
    return JSON.parse(await this.cliOk('usage', account, '--json')) as { protect: { used: number; limit: number }; verify: { used: number; limit: number } };
  }
}

// ── request bodies ──────────────────────────────────────────────────────────────────────────────

export interface Part {
  name: string;
  /** Omitted: a plain field; '' is sent as filename="". */
  filename?: string;
  /** Part Content-Type; omitted: no header. */
  type?: string;
  data: Buffer | string;
}

export interface Multipart {
  body: Buffer;
  contentType: string;
}

/** Builds a multipart/form-data body byte by byte (names and file names go out exactly as given). */
export function multipart(parts: Part[], boundary = `----optmark-test-${Math.random().toString(16).slice(2)}`): Multipart {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.type !== undefined) head += `Content-Type: ${p.type}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`, 'utf8'), Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The usual upload: one `image` file part. */
export function imageForm(image: Buffer, filename = 'photo.jpg', type = 'image/jpeg'): Multipart {
  return multipart([{ name: 'image', filename, type, data: image }]);
}

// ── fetch client ────────────────────────────────────────────────────────────────────────────────

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The parsed JSON body (undefined when it is not JSON). */
  json: any; // tests read arbitrary fields
}

function answerOf(status: number, headers: Record<string, string>, body: Buffer): Answer {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status, headers, body, json };
}

/** One request through fetch; headers come back lower-cased. */
export async function request(
  server: TestServer,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer } = {},
): Promise<Answer> {
  // Buffer's type admits a SharedArrayBuffer, which fetch's BodyInit does not; ours never is one.
  const r = await fetch(server.url(path), { method: init.method ?? 'GET', headers: init.headers, body: init.body as Uint8Array<ArrayBuffer> | undefined });
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => (headers[k] = v));
  return answerOf(r.status, headers, Buffer.from(await r.arrayBuffer()));
}

/** POST /api/v1/<endpoint> with a multipart body (one image part by default) and an optional key. */
export function api(
  server: TestServer,
  endpoint: 'protect' | 'verify',
  key: string | undefined,
  form: Multipart | Buffer,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const m = Buffer.isBuffer(form) ? imageForm(form) : form;
  const h: Record<string, string> = { 'Content-Type': m.contentType, ...headers };
  if (key !== undefined) h.Authorization = `Bearer ${key}`;
  return request(server, `/api/v1/${endpoint}`, { method: 'POST', headers: h, body: m.body });
}

// ── raw socket client ───────────────────────────────────────────────────────────────────────────

export interface RawOptions {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** How to cut the body: a fixed size, a list of sizes used in turn, or 'random' (1..8192, seeded). */
  chunks?: number | number[] | 'random';
  /** Milliseconds to wait between chunks (a slow trickle). */
  delayMs?: number;
  /** Content-Length to declare instead of the body's length (a lie, or a length the client never sends). */
  contentLength?: number;
  /** Send Transfer-Encoding: chunked (no Content-Length). */
  chunked?: boolean;
  /** With `chunked`: leave out the last (empty) chunk, so the body never ends; the server must answer anyway. */
  unterminated?: boolean;
  /** Close the connection after this many body bytes without reading any answer. */
  abortAfter?: number;
  /** How to close on abortAfter: 'end' sends FIN, 'reset' sends RST. */
  abortHow?: 'end' | 'reset';
  /** Give up (status 0) when no answer came within this many milliseconds; default 30 s, a hang detector. */
  timeoutMs?: number;
  /** Called after each chunk is handed to the socket, with the body bytes sent so far. */
  onProgress?: (sent: number) => unknown;
}

export interface RawAnswer extends Answer {
  /** Body bytes written to the socket before the answer arrived (or the socket closed). */
  sentBeforeAnswer: number;
  /** Whether the whole body had been written when the answer arrived. */
  bodyComplete: boolean;
}

function chunkSizer(spec: RawOptions['chunks']): () => number {
  if (spec === undefined) return () => 64 * 1024;
  if (typeof spec === 'number') return () => spec;
  if (spec === 'random') {
    const rnd = prng(4093); // seeded: a "random" chunking is the same on every run
    return () => 1 + Math.floor(rnd() * 8192);
  }
  let i = 0;
  return () => spec[i++ % spec.length]!;
}

/** Parses one HTTP/1.1 response out of `buf`; undefined until it is complete. */
function parseResponse(buf: Buffer, closed: boolean): Answer | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(lines[0]!.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = buf.subarray(end + 4);
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    return rest.length >= n ? answerOf(status, headers, rest.subarray(0, n)) : undefined;
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const eol = rest.indexOf('\r\n', at);
      if (eol < 0) return undefined;
      const size = parseInt(rest.subarray(at, eol).toString('latin1'), 16);
      if (size === 0) return answerOf(status, headers, Buffer.concat(parts));
      if (rest.length < eol + 2 + size + 2) return undefined;
      parts.push(rest.subarray(eol + 2, eol + 2 + size));
      at = eol + 2 + size + 2;
    }
  }
  return closed ? answerOf(status, headers, rest) : undefined;
}

/**
 * One request over a fresh TCP connection, its body written piece by piece as `options` says, while the
 * answer is watched for: writing stops as soon as an answer has arrived, so an early refusal is seen
 * with the body still unsent. Status 0: the connection closed without an answer.
 */
export function rawRequest(port: number, options: RawOptions): Promise<RawAnswer> {
  const body = options.body ?? Buffer.alloc(0);
  const headers: Record<string, string> = { Host: `127.0.0.1:${port}`, ...options.headers };
  if (options.chunked) headers['Transfer-Encoding'] = 'chunked';
  else headers['Content-Length'] = String(options.contentLength ?? body.length);
  const head = `${options.method ?? 'POST'} ${options.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

  return new Promise((resolvePromise, reject) => {
    const socket: Socket = connect({ port, host: '127.0.0.1', noDelay: true });
    const timer = setTimeout(() => socket.destroy(), options.timeoutMs ?? 30_000);
    let received = Buffer.alloc(0);
    let answer: Answer | undefined;
    let sent = 0;
    let done = false;
    let closed = false;
    let wake: (() => void) | undefined;
    const finish = (): void => {
      if (done) return;
      const a = answer ?? parseResponse(received, true) ?? answerOf(0, {}, Buffer.alloc(0));
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolvePromise({ ...a, sentBeforeAnswer: sent, bodyComplete: sent >= body.length });
    };
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      answer ??= parseResponse(received, false);
      if (answer) {
        wake?.();
        finish();
      }
    });
    socket.on('error', () => undefined); // a reset shows up as 'close'; the answer so far decides
    socket.on('close', () => {
      closed = true;
      wake?.();
      finish();
    });

    const sizer = chunkSizer(options.chunks);
    const write = (data: Buffer | string): Promise<void> =>
      new Promise((res) => {
        if (done || closed) return res();
        wake = res;
        socket.write(data, () => res());
      });

    const send = async (): Promise<void> => {
      await write(head);
      while (sent < body.length && !done && !closed) {
        if (options.abortAfter !== undefined && sent >= options.abortAfter) break;
        let n = Math.max(1, sizer());
        if (options.abortAfter !== undefined) n = Math.min(n, options.abortAfter - sent);
        const piece = body.subarray(sent, sent + n);
        await write(options.chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece);
        if (done || closed) break;
        sent += piece.length;
        await options.onProgress?.(sent);
        if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      }
      if (options.abortAfter !== undefined && !done) {
        done = true;
        clearTimeout(timer);
        if (options.abortHow === 'reset') socket.resetAndDestroy();
        else socket.destroySoon();
        resolvePromise({ ...answerOf(0, {}, Buffer.alloc(0)), sentBeforeAnswer: sent, bodyComplete: false });
        return;
      }
      if (options.chunked && !options.unterminated && !done && !closed) await write('0\r\n\r\n');
    };
    send().catch(reject);
  });
}

/** Whether a new TCP connection to the port is refused (the listener is closed). */
export function connectionRefused(port: number): Promise<boolean> {
  return new Promise((res) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      res(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => res(err.code === 'ECONNREFUSED'));
  });
}

/**
 * A request whose body is held back until its answer has arrived (an answer given from the headers
 * alone: a refusal), then sent whole, then `GET /healthz` on the same connection. `second` is that
 * GET's answer (status 0 if the connection was closed or reset instead); `reset` is true when the
 * socket saw an error (ECONNRESET, EPIPE) at any point.
 */
export function bodyAfterAnswer(
  port: number,
  options: { path: string; headers: Record<string, string>; body: Buffer },
): Promise<{ first: Answer; second: Answer; reset: boolean }> {
  const headers = { Host: `127.0.0.1:${port}`, ...options.headers, 'Content-Length': String(options.body.length) };
  const head = `POST ${options.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return new Promise((res) => {
    const socket = connect({ port, host: '127.0.0.1', noDelay: true });
    const none = answerOf(0, {}, Buffer.alloc(0));
    let received = Buffer.alloc(0);
    let first: Answer | undefined;
    let reset = false;
    const timer = setTimeout(() => socket.destroy(), 30_000);
    const done = (second: Answer): void => {
      clearTimeout(timer);
      socket.destroy();
      res({ first: first ?? none, second, reset });
    };
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      if (!first) {
        first = parseResponse(received, false);
        if (!first) return;
        // The first answer's own bytes go; what follows is the second's.
        const length = received.indexOf('\r\n\r\n') + 4 + first.body.length;
        received = received.subarray(length);
        socket.write(options.body);
        socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      }
      const second = parseResponse(received, false);
      if (second) done(second);
    });
    socket.on('error', () => (reset = true));
    socket.on('close', () => done(none));
    socket.write(head);
  });
}

/** A connection opened now and kept, for GET requests sent later (after the listener closed, say). */
export async function openConnection(port: number): Promise<{ get(path: string): Promise<Answer>; close(): void }> {
  const socket = connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise<void>((res, rej) => socket.once('connect', () => res()).once('error', rej));
  return {
    get: (path) =>
      new Promise((res) => {
        let received = Buffer.alloc(0);
        const onData = (d: Buffer): void => {
          received = Buffer.concat([received, d]);
          const answer = parseResponse(received, false);
          if (answer) {
            socket.off('data', onData);
            res(answer);
          }
        };
        socket.on('data', onData);
        socket.once('close', () => res(parseResponse(received, true) ?? answerOf(0, {}, Buffer.alloc(0))));
        socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      }),
    close: () => socket.destroy(),
  };
}

export interface HeldUpload {
  /** Resolves once `holdAt` body bytes are written and the upload is paused. */
  held: Promise<void>;
  /** Lets the rest of the body go. */
  release(): void;
  answer: Promise<RawAnswer>;
}

/** A raw request that stops after about `holdAt` body bytes and waits for release() before sending the rest. */
export function heldUpload(port: number, options: RawOptions, holdAt: number): HeldUpload {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let reached!: () => void;
  const held = new Promise<void>((r) => (reached = r));
  let holding = false;
  const answer = rawRequest(port, {
    ...options,
    onProgress: async (sent) => {
      await options.onProgress?.(sent);
      if (!holding && sent >= holdAt) {
        holding = true;
        reached();
        await released;
      }
    },
  });
  return { held, release, answer };
}
