// Child processes standing in for servers that share one store (test/fixtures/quota-worker.mjs, run
// against the built store in dist/): a race for the last units, a hammer killed with -9, a holder of
// units. Used by test/store-processes.test.ts and test/long/store-processes.test.ts.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll } from 'vitest';
import type { Store } from '../../src/store/index.js';
import { ROOT } from './server.js';
import type { StoreHarness } from './stores.js';

const WORKER = join(ROOT, 'test', 'fixtures', 'quota-worker.mjs');

export interface QuotaWorker {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  errors: () => string;
  ready: Promise<void>;
  exited: Promise<void>;
}

/** Throws the message that tells a developer to build first. */
function requireBuiltStore(): void {
  if (!existsSync(join(ROOT, 'dist', 'src', 'store', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');
}

/** The workers a test file started, killed after each test; the file fails at once without a built store. */
export function quotaWorkers(): QuotaWorkers {
  const workers = new QuotaWorkers();
  beforeAll(requireBuiltStore);
  afterEach(() => workers.killAll());
  return workers;
}

export class QuotaWorkers {
  readonly #children: ChildProcessWithoutNullStreams[] = [];

  /** Starts `node quota-worker.mjs ...args`; `ready` resolves once it printed "ready". */
  start(args: string[]): QuotaWorker {
    const child = spawn(process.execPath, [WORKER, ...args], { cwd: ROOT });
    this.#children.push(child);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    const exited = new Promise<void>((res) => child.on('close', () => res()));
    const ready = new Promise<void>((res, rej) => {
      const check = () => (out.startsWith('ready\n') ? res() : undefined);
      child.stdout.on('data', check);
      void exited.then(() => rej(new Error(`worker exited before ready: ${err}`)));
    });
    return { child, output: () => out, errors: () => err, ready, exited };
  }

  killAll(): void {
    for (const c of this.#children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
}

/** Resolves once the worker's output satisfies `done` (polled every 5 ms). */
export function outputUntil(w: QuotaWorker, done: (output: string) => boolean): Promise<void> {
  return new Promise<void>((res) => {
    const poll = setInterval(() => {
      if (done(w.output())) {
        clearInterval(poll);
        res();
      }
    }, 5);
  });
}

/** A store of the harness's engine with an account "racer" whose protect limit is `protectLimit`; the target the workers open. */
export async function racerStore(h: StoreHarness, protectLimit: number): Promise<{ target: string; store: Store; accountId: number }> {
  const dir = h.tempDir();
  const store = await h.open(dir, { protect: 1, verify: 1 });
  await store.createAccount('racer', 'pro');
  // An override, not a default: defaults come from each process's own configuration.
  const { id } = await store.setLimits('racer', { protect: protectLimit });
  return { target: h.urlFor(dir) ?? store.location, store, accountId: id };
}
