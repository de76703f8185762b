// The store shared by real processes, on both engines: kill -9 while units are held (a server killed
// during uploads, issue #20 item 6). The racing and kill-under-load runs are in
// test/long/store-processes.test.ts. The children run test/fixtures/quota-worker.mjs against the built
// store in dist/ (`npm test` builds).
import { describe, expect, it } from 'vitest';
import { outputUntil, quotaWorkers, racerStore } from './helpers/quota-workers.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const workers = quotaWorkers();

describe.each(ENGINES)('processes sharing the store on %s', (engine) => {
  const h = suiteStoreHarness(engine);

  it('regression (#20 item 6): units held by a process killed with -9 are given back, once', async () => {
    const { target, store, accountId } = await racerStore(h, 100);
    const w = workers.start(['hold', target, String(accountId), '5']);
    await w.ready;
    await outputUntil(w, (out) => out.includes('held\n'));
    expect((await store.quotaState(accountId, 'protect')).used).toBe(5);
    // Alive: nothing of it is given back.
    expect(await store.reconcile()).toBe(0);
    w.child.kill('SIGKILL');
    await w.exited;
    expect(await store.reconcile()).toBe(5);
    expect(await store.reconcile()).toBe(0);
    expect((await store.quotaState(accountId, 'protect')).used).toBe(0);
  });
});
