// The store shared by real processes: racing for the last units of a limit, and kill -9 under load.
// The children run test/fixtures/quota-worker.mjs against the built store in dist/ (`npm test` builds).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../src/store/index.js';

const ROOT = resolve(import.meta.dirname, '..');
const WORKER = join(ROOT, 'test', 'fixtures', 'quota-worker.mjs');
const children: ChildProcessWithoutNullStreams[] = [];
const dirs: string[] = [];

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist', 'src', 'store', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(protectLimit: number): { file: string; store: Store; accountId: number } {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-procs-'));
  dirs.push(dir);
  const store = Store.open({ dataDir: dir, defaultProtectLimit: 1, defaultVerifyLimit: 1 });
  store.createAccount('racer', 'pro');
  // An override, not a default: defaults come from each process's own configuration.
  const { id } = store.setLimits('racer', { protect: protectLimit });
  return { file: store.file, store, accountId: id };
}

interface Worker {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  ready: Promise<void>;
  exited: Promise<void>;
}

function worker(args: string[]): Worker {
  const child = spawn(process.execPath, [WORKER, ...args], { cwd: ROOT });
  children.push(child);
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
  return { child, output: () => out, ready, exited };
}

describe('racing processes', () => {
  it.each([
    ['commit only', 0],
    ['refunding every third unit', 3],
  ])('exactly the limit succeeds across 8 processes (%s)', async (_name, refundEvery) => {
    // Enough units left that the race lasts tens of milliseconds: with only a hundred, the first process
    // scheduled can take them all before the others wake up (two cores).
    const limit = 3000;
    const left = 2000;
    const { file, store, accountId } = setup(limit);
    // Use up all but the last `left` units, so the processes race for the last ones.
    for (let i = 0; i < limit - left; i++) expect(store.reserve(accountId, 'protect').ok).toBe(true);
    const workers = Array.from({ length: 8 }, () => worker(['race', file, String(accountId), String(refundEvery)]));
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.child.stdin.end('go\n');
    await Promise.all(workers.map((w) => w.exited));
    const results = workers.map((w) => JSON.parse(w.output().split('\n')[1]!) as { committed: number; refunded: number });
    const committed = results.reduce((n, r) => n + r.committed, 0);
    // Each process stops at its first refusal holding no unit, and the last to stop saw the counter at
    // the limit, so the committed units fill it exactly, refunds or not.
    expect(committed).toBe(left);
    expect(store.quotaState(accountId, 'protect').used).toBe(limit);
    if (refundEvery > 0) expect(results.reduce((n, r) => n + r.refunded, 0)).toBeGreaterThan(0);
    // More than one process won units: the race was real.
    expect(results.filter((r) => r.committed > 0).length).toBeGreaterThan(1);
    store.close();
  });
});

describe('kill -9 under load', () => {
  it('the counter on disk equals the reported successes, plus at most the in-flight reservations', async () => {
    const concurrency = 4;
    const { file, store, accountId } = setup(10_000_000);
    let counted = 0;
    for (let round = 0; round < 3; round++) {
      const w = worker(['hammer', file, String(accountId), String(concurrency)]);
      await w.ready;
      // Let it run a while under load, then kill it without warning.
      await new Promise<void>((res) => {
        const poll = setInterval(() => {
          if (w.output().length > 3 * 2000) {
            clearInterval(poll);
            res();
          }
        }, 5);
      });
      w.child.kill('SIGKILL');
      await w.exited;
      expect(w.child.signalCode).toBe('SIGKILL');
      const succeeded = w.output().split('\n').filter((l) => l === 'ok').length;
      const used = store.quotaState(accountId, 'protect').used;
      // Nothing that succeeded is lost; what is counted beyond it are the units reserved by the
      // loops that had not answered yet: at most one per loop.
      const extra = used - counted - succeeded;
      expect(extra).toBeGreaterThanOrEqual(0);
      expect(extra).toBeLessThanOrEqual(concurrency);
      counted = used;
    }
    // A fresh connection, as a restarted server would open, sees the same count.
    const reopened = Store.open({ dataDir: '.', file, defaultProtectLimit: 1, defaultVerifyLimit: 1 });
    expect(reopened.quotaState(accountId, 'protect').used).toBe(counted);
    reopened.close();
    store.close();
  });
});
