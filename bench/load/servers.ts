/**
 * The servers under test, each started as its own process on a loopback port: optmark exactly as an
 * operator runs it (`node dist/src/cli.js serve`, a temporary data directory holding one pro account
 * with unlimited quota), the naive comparison server and the transport baseline. Their output goes to log files, not through
 * this process, so the generator spends no CPU on it: in `logDir` when given (the run's --out folder),
 * else in the temporary folder. Temporary folders (optmark-bench-server-*) are removed when the server
 * stops, when its start fails, and when the run is interrupted (scratch.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MAX_LIMIT, StoreError, openStore } from '../../src/store/index.js';
import type { Target } from './client.js';
import { removeScratch, scratchDir, trackChild } from './scratch.js';
import { freePort } from '../lib/proc.js';

export { freePort };

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const NAIVE = fileURLToPath(new URL('./naive.js', import.meta.url));
const TRANSPORT = fileURLToPath(new URL('./transport.js', import.meta.url));

export interface Running {
  target: Target;
  /** The log file of the server's stdout and stderr. */
  log: string;
  /** /readyz as the server reported it after start (optmark only). */
  ready: Record<string, unknown> | undefined;
  /** The OPTMARK_* variables it was started with (besides host, port and data directory). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** The last lines of a log, for an error message (the log itself may be in a folder about to go). */
function tail(log: string, lines = 20): string {
  try {
    return readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

async function waitFor(child: ChildProcess, log: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`server exited during start (${child.exitCode ?? child.signalCode}); its log ends:\n${tail(log)}`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not ready after ${timeoutMs} ms; its log ends:\n${tail(log)}`);
}

/** Where a server's log goes: `logDir` (made if missing) when given, else its temporary folder. */
function logPath(name: string, dir: string, logDir: string | undefined): string {
  if (logDir === undefined) return join(dir, `${name}.log`);
  mkdirSync(logDir, { recursive: true });
  return join(logDir, `${name}.log`);
}

export interface OptmarkStart {
  /** Folder for the server's log (kept); by default it goes in the temporary folder and is removed with it. */
  logDir?: string;
  /** Pass the caller's OPTMARK_* settings through (pool size, queue, ...); false = the defaults. */
  inheritConfig: boolean;
  /** Log level of the server: `info` (the default an operator gets) unless told otherwise. */
  logLevel?: string;
  /** OPTMARK_* settings of this server, over the inherited ones. */
  env?: Record<string, string>;
  /** A data directory to share with other instances (one SQLite file for all; kept at stop). */
  dataDir?: string;
}

/** Starts `optmark serve` with one pro account of unlimited quota; resolves once /readyz says ready. */
export async function startOptmark(opts: OptmarkStart): Promise<Running> {
  const dir = scratchDir('optmark-bench-server-');
  try {
    return await startOptmarkIn(dir, opts);
  } catch (err) {
    removeScratch(dir);
    throw err;
  }
}

async function startOptmarkIn(dir: string, opts: OptmarkStart): Promise<Running> {
  const dataDir = opts.dataDir ?? join(dir, 'data');
  const port = await freePort();
  const config: Record<string, string> = {};
  if (opts.inheritConfig) {
    for (const [k, v] of Object.entries(process.env)) if (k.startsWith('OPTMARK_') && v !== undefined) config[k] = v;
  }
  Object.assign(config, opts.env);
  // The account lives in the store the server will use: its data directory's SQLite file, or the
  // PostgreSQL database it is given (shared by every instance started on it: created once).
  const store = await openStore({ dataDir, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT, databaseUrl: config.OPTMARK_DATABASE_URL });
  let key: string;
  try {
    await store.createAccount('bench', 'pro').catch((err: unknown) => {
      if (!(err instanceof StoreError && err.code === 'duplicate_account')) throw err;
    });
    await store.setLimits('bench', { protect: MAX_LIMIT, verify: MAX_LIMIT });
    key = (await store.issueKey('bench')).key;
  } finally {
    await store.close();
  }
  if (opts.logLevel) config.OPTMARK_LOG_LEVEL = opts.logLevel;
  for (const k of ['OPTMARK_HOST', 'OPTMARK_PORT', 'OPTMARK_DATA_DIR', 'OPTMARK_BOOTSTRAP']) delete config[k];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OPTMARK_') && v !== undefined) env[k] = v;
  Object.assign(env, config, { OPTMARK_HOST: '127.0.0.1', OPTMARK_PORT: String(port), OPTMARK_DATA_DIR: dataDir, OPTMARK_BOOTSTRAP: 'off' });

  const log = logPath('optmark-server', dir, opts.logDir);
  const fd = openSync(log, 'a');
  const child = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  trackChild(child);
  const url = new URL(`http://127.0.0.1:${port}`);
  let ready: Record<string, unknown> | undefined;
  try {
    await waitFor(
      child,
      log,
      async () => {
        const r = await fetch(new URL('/readyz', url));
        if (r.status !== 200) return false;
        ready = (await r.json()) as Record<string, unknown>;
        return true;
      },
      90_000,
    );
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return {
    target: { name: 'optmark', url, key, pid: child.pid },
    log,
    ready,
    env: config,
    stop: async () => {
      await stopChild(child);
      removeScratch(dir);
    },
  };
}

/** Starts the naive server; resolves once it accepts connections. */
export async function startNaive(logDir?: string): Promise<Running> {
  return startPlain('naive', NAIVE, [], logDir);
}

/** The transport baseline (transport.ts) with `workers` hashing threads: the tail target's baseline. */
export async function startTransportBaseline(workers: number, logDir?: string): Promise<Running> {
  return startPlain('transport baseline', TRANSPORT, [String(workers)], logDir);
}

/** A comparison server that takes its port as first argument and answers no health check. */
async function startPlain(name: string, script: string, args: string[], logDir?: string): Promise<Running> {
  const dir = scratchDir('optmark-bench-server-');
  try {
    const port = await freePort();
    const log = logPath(name.replace(/ /g, '-'), dir, logDir);
    const fd = openSync(log, 'a');
    const child = spawn(process.execPath, [script, String(port), ...args], { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    trackChild(child);
    const url = new URL(`http://127.0.0.1:${port}`);
    try {
      // A TCP connect, not a request: the naive server (like its original) throws on a request without a multipart body.
      await waitFor(child, log, () => canConnect(port), 30_000);
    } catch (err) {
      await stopChild(child);
      throw err;
    }
    const stop = async (): Promise<void> => {
      await stopChild(child);
      removeScratch(dir);
    };
    return { target: { name, url, key: undefined, pid: child.pid }, log, ready: undefined, env: {}, stop };
  } catch (err) {
    removeScratch(dir);
    throw err;
  }
}

/** GET /readyz of an optmark server (undefined when it does not answer). */
export async function readyz(url: URL): Promise<Record<string, unknown> | undefined> {
  try {
    const r = await fetch(new URL('/readyz', url));
    return (await r.json()) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
