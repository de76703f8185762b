/**
 * The scan jobs' store on both engines (src/scans/jobs/store*.ts), driven by an injected clock: the
 * daily counts (the account's limit refuses, the service's pauses; both reset at UTC midnight, paused
 * scans start oldest first), leases (a chunk whose lease ran out is taken over; the first holder can
 * no longer write it), items written once per index, and the scan done when no chunk is left.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { emptyCounts } from '../src/scans/analyse.js';
import type { ScanItem } from '../src/scans/types.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const DAY = Date.UTC(2031, 0, 10, 23, 59, 0);
const NEXT = Date.UTC(2031, 0, 11, 0, 0, 5);

function item(location: string, optedOut: boolean): ScanItem {
  return {
    location,
    sha256: 'a'.repeat(64),
    format: 'jpeg',
    optedOut,
    signals: optedOut ? ['plus.dataMining'] : [],
    servedSignals: [],
    provenance: null,
    fingerprint: null,
    c2pa: null,
    record: null,
    vault: null,
    error: null,
  };
}

describe.each(ENGINES)('scan jobs store (%s)', (engine) => {
  const h = suiteStoreHarness(engine);

  it('the account limit refuses, the service ceiling pauses; after midnight the paused start oldest first', async () => {
    const store = await h.open();
    const { id: a } = await store.createAccount('a', 'pro');
    const { id: b } = await store.createAccount('b', 'pro');
    const limits = { account: 2, service: 3 };
    const make = (account: number, now: number) => store.scans.create({ id: randomUUID(), accountId: account, source: '/x', options: {}, now }, limits);
    const states: string[] = [];
    for (const [acct, t] of [
      [a, DAY],
      [a, DAY + 1],
      [a, DAY + 2],
      [b, DAY + 3],
      [b, DAY + 4],
    ] as const) {
      const r = await make(acct, t);
      states.push(r.ok ? r.scan.state : 'refused');
    }
    expect(states).toEqual(['queued', 'queued', 'refused', 'queued', 'paused']);
    expect(await store.scans.resumePaused(DAY + 10, 3)).toBe(0);
    expect(await store.scans.resumePaused(NEXT, 3)).toBe(1);
    const counts = await store.scans.stateCounts();
    expect([counts.queued, counts.paused]).toEqual([4, 0]);
    const r = await make(a, NEXT);
    expect(r.ok && r.scan.state).toBe('queued');
  });

  it("a lapsed lease is taken over; the first holder's late write is refused; items are written once; done when no chunk is left", async () => {
    const store = await h.open();
    const { id: acct } = await store.createAccount('c', 'pro');
    const created = await store.scans.create({ id: randomUUID(), accountId: acct, source: '/x', options: {}, now: DAY }, { account: 10, service: 10 });
    if (!created.ok) throw new Error('refused');
    const scanId = created.scan.id;
    const first = await store.scans.claim('A', DAY, 1000);
    expect(first).toMatchObject({ k: 0, scan: { id: scanId, state: 'running' } });
    expect(await store.scans.claim('B', DAY + 500, 1000)).toBeUndefined();
    await store.scans.addChunk(scanId, 1);
    await store.scans.addChunk(scanId, 1);
    const second = await store.scans.claim('B', DAY + 600, 1000);
    expect(second?.k).toBe(1);
    expect(await store.scans.complete('B', scanId, 1, [{ index: 25, item: item('z', false) }], DAY + 700)).toBe(true);
    expect((await store.scans.get(acct, scanId))?.state).toBe('running');
    // A's lease ran out: B takes chunk 0 over.
    const taken = await store.scans.claim('B', DAY + 1500, 1000);
    expect(taken?.k).toBe(0);
    expect(await store.scans.renew('A', scanId, 0, DAY + 1600, 1000)).toBe(false);
    expect(await store.scans.complete('A', scanId, 0, [{ index: 0, item: item('x', true) }], DAY + 1700)).toBe(false);
    const items = [
      { index: 0, item: item('x', true) },
      { index: 1, item: item('y', false) },
    ];
    expect(await store.scans.complete('B', scanId, 0, items, DAY + 1800)).toBe(true);
    const done = await store.scans.get(acct, scanId);
    expect(done?.state).toBe('done');
    expect(done?.progress).toBe(3);
    expect(done?.counts).toEqual({ ...emptyCounts(), images: 3, optedOut: 1, noOptOut: 2 });
    expect((await store.scans.items(scanId, 0, 10)).map((i) => [i.index, i.item.location])).toEqual([
      [0, 'x'],
      [1, 'y'],
      [25, 'z'],
    ]);
    expect(await store.scans.cancel(acct, scanId, DAY + 2000)).toMatchObject({ state: 'done' });
    expect(await store.scans.get(acct + 1, scanId)).toBeUndefined();
  });
});
