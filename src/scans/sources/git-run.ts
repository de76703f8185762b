/**
 * The system `git` as a scan runs it: a clean environment (no system or global config, no credential
 * prompts, no proxies from the environment, no templates), only the URL's protocol allowed, no hooks,
 * no redirects, and limits on time and bytes (the clone's folder measured as it grows; for git:// the
 * proxy command also counts what it receives). A killed run takes its children with it (its own process
 * group). Then `git cat-file --batch`, which reads objects by id: nothing is ever checked out.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScanError } from '../types.js';

/** How often the clone's folder is measured against the byte limit (ms). */
const MEASURE_EVERY_MS = 50;
/** The last bytes of git's stderr kept for a failure's message. */
const STDERR_KEEP = 4096;

/** Settings every git run gets on its command line (`-c`), overriding anything a config could say. */
export function safeConfig(allowProtocol: string | undefined): string[] {
  const c = [
    'core.hooksPath=/dev/null',
    'core.symlinks=false',
    'core.fsmonitor=false',
    'core.askPass=',
    'credential.helper=',
    'init.templateDir=',
    'protocol.allow=never',
    'protocol.file.allow=never',
    'http.followRedirects=false',
    'http.proxy=',
    'submodule.recurse=false',
    'fetch.recurseSubmodules=false',
    'gc.auto=0',
    'maintenance.auto=false',
    'fetch.writeCommitGraph=false',
  ];
  if (allowProtocol) c.push(`protocol.${allowProtocol}.allow=always`);
  return c.flatMap((kv) => ['-c', kv]);
}

/** The environment of every git run: nothing of this process's but the path to programs. */
export function cleanEnv(home: string, allowProtocol: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: home,
    XDG_CONFIG_HOME: home,
    LANG: 'C',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    SSH_ASKPASS: '',
    // Only the URL's protocol (a name no protocol has, when none may be used: no lazy fetch after the clone).
    GIT_ALLOW_PROTOCOL: allowProtocol ?? 'none',
    GIT_NO_LAZY_FETCH: '1',
    GIT_PROTOCOL_FROM_USER: '0',
    ...extra,
  };
}

/** bin/git-proxy.mjs of this package (from src/ or dist/src/). */
export function gitProxyScript(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'optmark') return join(dir, 'bin', 'git-proxy.mjs');
  }
  throw new Error('bin/git-proxy.mjs not found beside the optmark package');
}

export interface RunLimits {
  /** The folder whose size is held under maxBytes while git runs. */
  folder: string;
  maxBytes: number;
  timeoutMs: number;
  signal: AbortSignal;
}

/** Runs git to its end within the limits; resolves with its stdout, throws ScanError (git_failed, budget_exceeded, timeout). */
export function runGit(args: string[], env: Record<string, string>, limits: RunLimits): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const child = spawn('git', args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out: Buffer[] = [];
    let err = '';
    let stopped: ScanError | undefined;
    // What git prints (a listing of a huge tree) is held here, so it counts against the byte limit too.
    let printed = 0;
    child.stdout.on('data', (c: Buffer) => {
      printed += c.length;
      if (printed > limits.maxBytes) stop(new ScanError('budget_exceeded', `git's listing passed the scan's byte limit of ${limits.maxBytes}`));
      else out.push(c);
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => (err = (err + s).slice(-STDERR_KEEP)));
    const stop = (e: ScanError): void => {
      stopped ??= e;
      killGroup(child);
    };
    // (A timer past 2^31 - 1 ms would fire at once: an unbounded run has none.)
    const timer =
      Number.isFinite(limits.timeoutMs) && limits.timeoutMs < 2 ** 31
        ? setTimeout(() => stop(new ScanError('timeout', `git took longer than ${limits.timeoutMs} ms`)), limits.timeoutMs)
        : undefined;
    const onAbort = (): void => stop(new ScanError('timeout', 'the scan was stopped'));
    limits.signal.addEventListener('abort', onAbort, { once: true });
    let measuring = false;
    const measure = setInterval(() => {
      if (measuring) return;
      measuring = true;
      void folderBytes(limits.folder).then((n) => {
        measuring = false;
        if (n > limits.maxBytes) stop(new ScanError('budget_exceeded', `the clone grew past the scan's byte limit of ${limits.maxBytes}`));
      });
    }, MEASURE_EVERY_MS);
    child.on('error', (e) => stop(new ScanError('git_failed', `git could not be run: ${e.message}`)));
    child.on('close', async (code) => {
      clearTimeout(timer);
      clearInterval(measure);
      limits.signal.removeEventListener('abort', onAbort);
      // Measured once more at the end: a transfer faster than the measuring still meets the limit.
      if (!stopped && (await folderBytes(limits.folder)) > limits.maxBytes)
        stopped = new ScanError('budget_exceeded', `the clone grew past the scan's byte limit of ${limits.maxBytes}`);
      if (stopped) return reject(stopped);
      if (code !== 0) {
        const budget = /byte limit of \d+/.exec(err);
        if (budget) return reject(new ScanError('budget_exceeded', `the transfer passed the scan's ${budget[0]}`));
        return reject(new ScanError('git_failed', `git ${args.find((a) => !a.startsWith('-') && !a.includes('=')) ?? ''} failed: ${lastLines(err)}`));
      }
      resolve(Buffer.concat(out));
    });
  });
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/** git's last few stderr lines, one line, printable. */
function lastLines(stderr: string): string {
  const lines = stderr
    .split(/\r?\n|\r/)
    .map((l) => l.trim())
    .filter(Boolean);
  return (lines.slice(-3).join('; ') || 'no message').replace(/[^\x20-\x7e]/g, '?').slice(0, 400);
}

/** Bytes of every file below `dir` (links counted as themselves). */
export async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await folderBytes(p);
    else
      total += await lstat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}

/**
 * `git cat-file --batch` on one repository: objects read by id, one at a time, over its pipes
 * (header `<oid> <type> <size>`, the content, a newline; `<oid> missing` for none).
 */
export class CatFile {
  readonly #child: ChildProcess;
  readonly #chunks: Buffer[] = [];
  #buffered = 0;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(gitDir: string, env: Record<string, string>) {
    this.#child = spawn('git', [...safeConfig(undefined), `--git-dir=${gitDir}`, 'cat-file', '--batch'], {
      env,
      stdio: ['pipe', 'pipe', 'ignore'],
      detached: true,
    });
    this.#child.stdout!.on('data', (c: Buffer) => {
      this.#chunks.push(c);
      this.#buffered += c.length;
      this.#notify();
    });
    const end = (): void => {
      this.#ended = true;
      this.#notify();
    };
    this.#child.on('close', end);
    this.#child.on('error', end);
    this.#child.stdin!.on('error', end);
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  async #fill(n: number): Promise<void> {
    while (this.#buffered < n) {
      if (this.#ended) throw new ScanError('git_failed', 'git cat-file stopped before answering');
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  #take(n: number): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    this.#chunks.length = 0;
    const taken = all.subarray(0, n);
    if (all.length > n) this.#chunks.push(all.subarray(n));
    this.#buffered = all.length - n;
    return taken;
  }

  async #line(): Promise<string> {
    for (;;) {
      const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
      this.#chunks.length = 0;
      if (all.length) this.#chunks.push(all);
      const nl = all.indexOf(0x0a);
      if (nl >= 0) {
        const line = this.#take(nl + 1);
        return line.subarray(0, nl).toString('latin1');
      }
      await this.#fill(all.length + 1);
    }
  }

  /** The object's content, or null when the repository does not have it. */
  async read(oid: string): Promise<Buffer | null> {
    if (!/^[0-9a-f]{40,64}$/.test(oid)) throw new ScanError('git_failed', `not an object id: ${oid}`);
    this.#child.stdin!.write(`${oid}\n`);
    const header = await this.#line();
    if (header.endsWith(' missing')) return null;
    const size = Number(header.split(' ')[2]);
    if (!Number.isSafeInteger(size) || size < 0) throw new ScanError('git_failed', `git cat-file answered ${JSON.stringify(header)}`);
    await this.#fill(size + 1);
    const content = Buffer.from(this.#take(size));
    this.#take(1);
    return content;
  }

  close(): void {
    this.#child.stdin!.end();
    killGroup(this.#child);
  }
}
