/**
 * One candidate as one result item (src/scans/analyse.ts) over the real verify (src/pipeline/verify.ts
 * verifyReport, with the opt-out field read and no keys): the item's fields, a bad image or a failed
 * load as an item with an error (never a throw), the record looked up by the SHA-256, and the summary's
 * counts by their definitions.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { protect, SIGNAL_DATA_MINING } from '../src/marking/engine.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { addToCounts, analyseCandidate, emptyCounts } from '../src/scans/analyse.js';
import { type Candidate, ScanError, type ScanItem } from '../src/scans/types.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const jpeg = readFileSync(join(CORPUS, 'sharp_testimgl.jpg'));
const marked = Buffer.from(protect(jpeg).bytes);
const deps = { verify: (b: Uint8Array) => verifyReport(b, noLayers) };
const candidate = (location: string, bytes: Uint8Array, servedSignals: string[] = []): Candidate => ({
  index: 0,
  location,
  load: async () => ({ bytes, servedSignals }),
});

describe('analyseCandidate', () => {
  it('an image: the verify report in the item, its sha256, the record of that sha256', async () => {
    const looked: string[] = [];
    const item = await analyseCandidate(candidate('x#a.jpg', marked, ['x-robots-tag:noai']), {
      ...deps,
      recordOf: async (sha) => {
        looked.push(sha);
        return { id: 'rec_1', createdAt: '2000-01-01T00:00:00.000Z' };
      },
    });
    const sha = createHash('sha256').update(marked).digest('hex');
    expect(item).toEqual({
      location: 'x#a.jpg',
      sha256: sha,
      format: 'jpeg',
      optedOut: true,
      signals: [SIGNAL_DATA_MINING],
      servedSignals: ['x-robots-tag:noai'],
      provenance: { present: false, valid: false, verifiable: false },
      fingerprint: { present: false, confidence: 0, blocks: 0 },
      c2pa: expect.objectContaining({ present: false }),
      record: { id: 'rec_1', createdAt: '2000-01-01T00:00:00.000Z' },
      // No vaultOf: no vault searched.
      vault: null,
      error: null,
    });
    expect(looked).toEqual([sha]);
  });

  it.each([
    ['a damaged image', candidate('d.png', readFileSync(join(CORPUS, 'pillow_broken.png'))), /^[a-z_]+$/],
    ['no image at all', candidate('t.txt', Buffer.from('hello')), /^not_an_image$/],
    ['a load that fails', { index: 0, location: 'l.jpg', load: () => Promise.reject(new ScanError('lfs_pointer', 'a pointer')) }, /^lfs_pointer$/],
  ])('%s: an item with an error, not a throw', async (_name, c, code) => {
    const item = await analyseCandidate(c as Candidate, deps);
    expect(item.error?.code).toMatch(code);
    expect([item.sha256, item.optedOut, item.record]).toEqual([null, false, null]);
  });
});

describe('addToCounts', () => {
  const base: ScanItem = {
    location: 'x',
    sha256: 'a',
    format: 'jpeg',
    optedOut: false,
    signals: [],
    servedSignals: [],
    provenance: null,
    fingerprint: null,
    c2pa: null,
    record: null,
    vault: null,
    error: null,
  };
  const ours = { provenance: { present: true, valid: true, verifiable: true } };
  const table: [string, Partial<ScanItem>, Partial<ReturnType<typeof emptyCounts>>][] = [
    ['no opt-out', {}, { images: 1, noOptOut: 1 }],
    ['embedded', { optedOut: true }, { images: 1, optedOut: 1 }],
    ['served only', { servedSignals: ['robots.txt'] }, { images: 1, servedOptOut: 1 }],
    ['both', { optedOut: true, servedSignals: ['ai.txt'] }, { images: 1, optedOut: 1, servedOptOut: 1 }],
    ['ours, opted out', { ...ours, optedOut: true }, { images: 1, optedOut: 1, ours: 1 }],
    ['ours, stripped, served', { ...ours, servedSignals: ['tdmrep.json'] }, { images: 1, servedOptOut: 1, ours: 1, oursStripped: 1 }],
    ['ours by fingerprint alone', { fingerprint: { present: true, confidence: 0.9, blocks: 256 } }, { images: 1, noOptOut: 1, ours: 1, oursStripped: 1 }],
    ['provenance of an unknown key', { provenance: { present: true, valid: false, verifiable: false } }, { images: 1, noOptOut: 1 }],
    ['failed', { error: { code: 'damaged_image', message: 'x' }, servedSignals: ['ai.txt'] }, { images: 1, failed: 1 }],
    ['an LFS pointer', { error: { code: 'lfs_pointer', message: 'x' } }, { skipped: 1 }],
    ['looks like a vault original', { vault: [{ id: 'o', name: 'a.jpg', distance: 12, record: null }] }, { images: 1, noOptOut: 1, inVault: 1 }],
    ['vault searched, nothing alike', { vault: [] }, { images: 1, noOptOut: 1 }],
  ];
  it.each(table)('%s', (_name, item, expected) => {
    expect(addToCounts(emptyCounts(), { ...base, ...item })).toEqual({ ...emptyCounts(), ...expected });
  });
  it('counts stored before inVault existed gain it', () => {
    const { inVault: _, ...old } = emptyCounts();
    const match = { ...base, vault: [{ id: 'o', name: 'a.jpg', distance: 0, record: null }] };
    expect(addToCounts(old as ReturnType<typeof emptyCounts>, match).inVault).toBe(1);
  });
});
