/**
 * The servers under test, each started as its own process on a loopback port: optmark exactly as an
 * operator runs it (`node dist/src/cli.js serve`, a temporary data directory holding one pro account
 * with unlimited quota), the naive comparison server and the transport baseline. Their output goes to log files, not through
 * this process, so the generator spends no CPU on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MAX_LIMIT, Store } from '../store/index.js';
import type { Target } from './client.js';

const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));
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

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
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

async function waitFor(child: ChildProcess, log: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`server exited during start (${child.exitCode ?? child.signalCode}); see ${log}`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not ready after ${timeoutMs} ms; see ${log}`);
}

export interface OptmarkStart {
  /** Directory for the data directory and log (a temporary one by default). */
  workDir?: string;
  /** Pass the caller's OPTMARK_* settings through (pool size, queue, ...); false = the defaults. */
  inheritConfig: boolean;
  /** Log level of the server: `info` (the default an operator gets) unless told otherwise. */
  logLevel?: string;
  /** OPTMARK_* settings of this server, over the inherited ones. */
  env?: Record<string, string>;
}

/** Starts `optmark serve` with one pro account of unlimited quota; resolves once /readyz says ready. */
export async function startOptmark(opts: OptmarkStart): Promise<Running> {
  const dir = opts.workDir ?? mkdtempSync(join(tmpdir(), 'optmark-bench-server-'));
  const dataDir = join(dir, 'data');
  const store = Store.open({ dataDir, defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  let key: string;
  try {
    store.createAccount('bench', 'pro');
    store.setLimits('bench', { protect: MAX_LIMIT, verify: MAX_LIMIT });
    key = store.issueKey('bench').key;
  } finally {
    store.close();
  }
  const port = await freePort();
  const config: Record<string, string> = {};
  if (opts.inheritConfig) {
    for (const [k, v] of Object.entries(process.env)) if (k.startsWith('OPTMARK_') && v !== undefined) config[k] = v;
  }
  Object.assign(config, opts.env);
  if (opts.logLevel) config.OPTMARK_LOG_LEVEL = opts.logLevel;
  for (const k of ['OPTMARK_HOST', 'OPTMARK_PORT', 'OPTMARK_DATA_DIR', 'OPTMARK_BOOTSTRAP']) delete config[k];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OPTMARK_') && v !== undefined) env[k] = v;
  Object.assign(env, config, { OPTMARK_HOST: '127.0.0.1', OPTMARK_PORT: String(port), OPTMARK_DATA_DIR: dataDir, OPTMARK_BOOTSTRAP: 'off' });

  const log = join(dir, 'server.log');
  const fd = openSync(log, 'a');
  const child = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
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
      if (!opts.workDir) rmSync(join(dir, 'data'), { recursive: true, force: true });
    },
  };
}

/** Starts the naive server; resolves once it accepts connections. */
export async function startNaive(workDir?: string): Promise<Running> {
  return startPlain('naive', NAIVE, [], workDir);
}

/** The transport baseline (transport.ts) with `workers` hashing threads: the tail target's baseline. */
export async function startTransportBaseline(workers: number, workDir?: string): Promise<Running> {
  return startPlain('transport baseline', TRANSPORT, [String(workers)], workDir);
}

/** A comparison server that takes its port as first argument and answers no health check. */
async function startPlain(name: string, script: string, args: string[], workDir?: string): Promise<Running> {
  const dir = workDir ?? mkdtempSync(join(tmpdir(), 'optmark-bench-plain-'));
  const port = await freePort();
  const log = join(dir, `${name.replace(/ /g, '-')}.log`);
  const fd = openSync(log, 'a');
  const child = spawn(process.execPath, [script, String(port), ...args], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const url = new URL(`http://127.0.0.1:${port}`);
  try {
    // A TCP connect, not a request: the naive server (like its original) throws on a request without a multipart body.
    await waitFor(child, log, () => canConnect(port), 30_000);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { target: { name, url, key: undefined, pid: child.pid }, log, ready: undefined, env: {}, stop: () => stopChild(child) };
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
