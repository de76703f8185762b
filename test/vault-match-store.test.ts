/**
 * store.vault.vaultMatches on both engines (SQLite: the scan in JS; PostgreSQL: the distance in SQL):
 * the originals a copy of a photograph looks like, kept with the hashes perceptualHash gives at ingest.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { jpeg, resizeArea } from '../bench/lib/fingerprint-attacks.js';
import type { Store } from '../src/store/index.js';
import { perceptualHash } from '../src/vault/phash.js';
import { keptHash } from '../src/vault/recognition.js';
import { ENGINES, suiteStoreHarness } from './helpers/stores.js';

const NATURAL = fileURLToPath(new URL('../../shared/natural', import.meta.url));
const photo = (n: string): Buffer => readFileSync(`${NATURAL}/${n}`);
const hash = async (b: Uint8Array): Promise<string> => keptHash(await perceptualHash(b))!;

async function keep(
  store: Store,
  accountId: number,
  id: string,
  name: string,
  kind: 'original' | 'marked',
  phash: string | null,
  record: string | null = null,
) {
  const r = await store.vault.reserve(accountId, 1000, 10_000_000_000, new Date(Date.now() + 60_000));
  if (!r.ok) throw new Error(`reserve: ${r.reason}`);
  const sha256 = id.padEnd(64, '0').slice(0, 64);
  await store.vault.commit(r.id, accountId, {
    id,
    name,
    sha256,
    bytes: 1000,
    mimeType: 'image/png',
    createdAt: new Date().toISOString(),
    kind,
    record,
    storageKey: `key-${id}`,
    phash,
  });
}

describe.each(ENGINES)('vaultMatches (%s)', (engine) => {
  const h = suiteStoreHarness(engine);

  it("reports the account's originals a copy looks like, nearest first, and nothing else", async () => {
    const store = await h.open();
    const a = await store.createAccount('rights-desk', 'pro');
    const b = await store.createAccount('someone-else', 'pro');
    for (const acc of [a, b]) await store.vault.setEnabled(acc.id, true);
    const original = photo('kodim03.png');
    await keep(store, a.id, 'aaaa1', 'kodim03.png', 'original', await hash(original), 'rec-3');
    await keep(store, a.id, 'aaaa2', 'kodim08.png', 'original', await hash(photo('kodim08.png')));
    await keep(store, a.id, 'aaaa3', 'flat.png', 'original', null);
    // A marked file is kept beside its original but is not what recognition reports.
    await keep(store, a.id, 'aaaa4', 'kodim03-marked.png', 'marked', await hash(original));
    await keep(store, b.id, 'bbbb1', 'kodim03.png', 'original', await hash(original));

    const copy = await hash(await jpeg(70)(await resizeArea(0.25)(original, () => 0.5), () => 0.5));
    const found = await store.vault.vaultMatches(a.id, copy);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ id: 'aaaa1', name: 'kodim03.png', record: 'rec-3' });
    expect(found[0]!.distance).toBeGreaterThan(0);
    expect(found[0]!.distance).toBeLessThanOrEqual(48);

    expect(await store.vault.vaultMatches(a.id, await hash(photo('kodim15.png')))).toEqual([]);
    expect((await store.vault.vaultMatches(b.id, copy)).map((m) => m.id)).toEqual(['bbbb1']);
    await expect(store.vault.vaultMatches(a.id, 'not a hash')).rejects.toThrow(RangeError);
  });
});
