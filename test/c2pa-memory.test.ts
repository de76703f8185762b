/**
 * Content Credentials and memory (issue #37 point 2). The reader (c2pa-rs as wasm) reserves memory for a
 * length it was told before it finds the bytes missing, and its wasm memory never shrinks: the corpus
 * file with one CBOR text string declaring 2^31-1 bytes left a worker holding 2 GB for good. Lengths
 * inside the store (JUMBF boxes, CBOR, the DER of x5chain certificates) are checked against what holds
 * them before the reader sees the file (422 content_credentials_malformed); and whatever the reader does,
 * a worker whose memory after a task passed OPTMARK_WORKER_MEMORY_LIMIT_BYTES is replaced, and
 * /metrics says so.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasManifestStore } from '../src/c2pa/detect.js';
import { loadC2paIdentity } from '../src/c2pa/identity.js';
import { readC2pa } from '../src/c2pa/reader.js';
import { checkManifestStore, checkStoreBytes } from '../src/c2pa/store-check.js';
import { parseImage } from '../src/formats/index.js';
import { manifestStoreBytes } from '../src/formats/manifest-store.js';
import { protectWithCredentials } from '../src/pipeline/credentials.js';
import { expectError } from './helpers/assert.js';
import { withCredentials } from './helpers/c2pa.js';
import { smallImage } from './helpers/images.js';
import { api, imageForm, request, TestServer, testPool } from './helpers/server.js';

const SHARED = join(__dirname, '..', '..', 'shared');
const REPRO = join(SHARED, 'repro', 'c2pa');
const haveRepro = existsSync(join(REPRO, 'model.mjs')) && existsSync(join(SHARED, 'corpus', 'c2pa_C_with_CAWG_data.jpg'));
const CAWG = (): Buffer => readFileSync(join(SHARED, 'corpus', 'c2pa_C_with_CAWG_data.jpg'));

/** The corpus CAWG file with one CBOR text string of its training-mining assertion declaring `len` bytes (mk-cbor-len.mjs). */
async function cborLength(len: number): Promise<Buffer> {
  const { getStore, withStore } = await import(join(REPRO, 'jumbf.mjs'));
  const { parseStore, enrich, serStore, allBoxes } = await import(join(REPRO, 'model.mjs'));
  const { cborNodes } = await import(join(REPRO, 'trees.mjs'));
  const buf = CAWG();
  const tree = enrich(parseStore(getStore('jpeg', buf)));
  const box = allBoxes(tree)
    .map((x: { b: { cbor?: unknown; label?: string } }) => x.b)
    .find((b: { cbor?: unknown; label?: string }) => b.cbor && /training-mining/.test(b.label ?? ''));
  const s = cborNodes(box.cbor)
    .map((x: { n: { t: string } }) => x.n)
    .find((n: { t: string }) => n.t === 'tstr');
  s.lenOverride = len;
  s.w = 4;
  return withStore('jpeg', buf, serStore(tree));
}

describe('lengths inside the store, checked before the reader sees it', () => {
  it.runIf(haveRepro)('the CBOR text string declaring 2^31-1 bytes: reported by verify and refused by protect, unread, with the length named', async () => {
    const file = new Uint8Array(await cborLength(2 ** 31 - 1));
    expect(hasManifestStore('jpeg', file)).toBe(true);
    const expected = {
      code: 'content_credentials_malformed',
      message: expect.stringMatching(/CBOR text string at offset \d+ declares 2147483647 bytes, and \d+ are left in its box/),
    };
    const reading = await readC2pa('jpeg', file);
    expect(reading.c2pa).toEqual({ present: true, valid: false, trainingMining: null });
    expect(reading.warnings).toEqual([expected]);
    const identity = await loadC2paIdentity({ dataDir: mkdtempSync(join(tmpdir(), 'optmark-c2pa-mem-')) });
    await expect(protectWithCredentials(file, {}, { mode: 'update', identity: async () => identity })).rejects.toMatchObject(expected);
  });

  it.runIf(haveRepro)(
    'the corpus files and update manifests optmark writes pass; the store is what the container holds',
    async () => {
      // The store as the repro folder's own extractor (jumbf.mjs) sees it, and it passes the check.
      const { getStore } = await import(join(REPRO, 'jumbf.mjs'));
      const same = (format: string, file: Uint8Array) =>
        expect(Buffer.from(manifestStoreBytes(parseImage(file))!).equals(getStore(format, Buffer.from(file)))).toBe(true);
      for (const name of ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg']) {
        const file = new Uint8Array(readFileSync(join(SHARED, 'corpus', name)));
        same('jpeg', file);
        expect(() => checkManifestStore(file)).not.toThrow();
      }
      for (const format of ['png', 'webp', 'jpeg'] as const) {
        const signed = await withCredentials(format, await smallImage(format));
        same(format, signed);
        expect(() => checkManifestStore(signed)).not.toThrow();
      }
    },
    60_000,
  );

  it('JUMBF box lengths past their parent, CBOR counts past their box, DER in x5chain past its certificate: each refused', () => {
    const box = (type: string, body: Uint8Array, length = body.length + 8): Buffer => {
      const h = Buffer.alloc(8);
      h.writeUInt32BE(length >>> 0, 0);
      h.write(type, 4, 'latin1');
      return Buffer.concat([h, body]);
    };
    const jumd = (label: string): Buffer =>
      box('jumd', Buffer.concat([Buffer.from('6332706100110010800000aa00389b71', 'hex'), Buffer.from([0x03]), Buffer.from(`${label}\0`)]));
    const superbox = (label: string, ...content: Buffer[]): Buffer => box('jumb', Buffer.concat([jumd(label), ...content]));
    const ok = superbox('c2pa', superbox('c2pa.assertions', box('cbor', Buffer.from([0xa1, 0x61, 0x61, 0x01]))));
    expect(() => checkStoreBytes(ok)).not.toThrow();
    const malformed = (store: Buffer, what: RegExp) => expect(() => checkStoreBytes(store)).toThrow(what);
    malformed(superbox('c2pa', box('cbor', Buffer.from([0xa1]), 0x7fffffff)), /JUMBF box 'cbor' at offset \d+ declares 2147483647 bytes/);
    malformed(superbox('c2pa', box('cbor', Buffer.from([0x9b, 0, 0, 0, 1, 0, 0, 0, 0]))), /CBOR array at offset \d+ declares 4294967296 entries/);
    malformed(superbox('c2pa', box('cbor', Buffer.from([0x5a, 0x7f, 0xff, 0xff, 0xff, 0x00]))), /CBOR byte string at offset \d+ declares 2147483647 bytes/);
    malformed(superbox('c2pa', box('cbor', Buffer.from([0x7f, 0x61, 0x61]))), /indefinite CBOR text string at offset \d+ has no end/);
    malformed(superbox('c2pa', box('cbor', Buffer.from([0x1c]))), /reserved length encoding/);
    // A COSE_Sign1 whose x5chain certificate declares a SEQUENCE longer than itself.
    const cert = Buffer.from([0x30, 0x84, 0x7f, 0xff, 0xff, 0xff, 0x02, 0x01, 0x01]);
    const prot = Buffer.concat([Buffer.from([0xa1, 0x18, 0x21, 0x40 | cert.length]), cert]);
    const cose = Buffer.concat([Buffer.from([0xd2, 0x84, 0x40 | prot.length]), prot, Buffer.from([0xa0, 0xf6, 0x40])]);
    malformed(superbox('c2pa', superbox('c2pa.signature', box('cbor', cose))), /certificate's DER element at offset \d+ declares 2147483647 bytes/);
    // The same bytes outside a signature are an opaque byte string: not DER, not refused.
    expect(() => checkStoreBytes(superbox('c2pa', superbox('c2pa.assertions', box('cbor', cose))))).not.toThrow();
    let deep = box('cbor', Buffer.from([0x01]));
    for (let i = 0; i < 70; i++) deep = box('jumb', deep);
    malformed(deep, /nested deeper than 64/);
  });
});

describe('a worker whose memory passed its limit is replaced', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'optmark-pool-mem-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('every task answered, the worker replaced after each (limit below any worker), counted in the stats', async () => {
    const workers = await testPool(dataDir, { memoryLimitBytes: 1 });
    try {
      const form = imageForm(await smallImage('jpeg'));
      const threads = new Set<number>();
      for (let i = 0; i < 4; i++) {
        const answer = JSON.parse((await workers.request('verify', form)).toString());
        expect(answer.optedOut).toBe(false);
        threads.add(...workers.pool.threads.map((t) => t.threadId));
      }
      expect(threads.size).toBeGreaterThanOrEqual(2);
      // Concurrent tasks while workers retire: none fails.
      const all = await Promise.all(Array.from({ length: 3 }, () => workers.request('protect', form)));
      expect(all.every((b) => JSON.parse(b.toString()).imageBase64)).toBe(true);
      const stats = workers.pool.stats;
      expect(stats.memoryRecycles).toBeGreaterThanOrEqual(5);
      expect(stats.threads).toBeLessThanOrEqual(1);
    } finally {
      await workers.close();
    }
  }, 120_000);

  it('a limit no worker reaches: no worker replaced, its memory reported', async () => {
    const workers = await testPool(dataDir, { memoryLimitBytes: 8 * 1024 ** 3 });
    try {
      await workers.request('verify', imageForm(await smallImage('png'), 'a.png', 'image/png'));
      expect(workers.pool.stats.memoryRecycles).toBe(0);
      expect(workers.pool.stats.workerMemoryMaxBytes).toBeGreaterThan(1024 * 1024);
    } finally {
      await workers.close();
    }
  }, 60_000);
});

describe('through the server', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    // 16 MiB, the smallest limit allowed: below every worker's heap, so every task replaces its worker.
    server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2', OPTMARK_WORKER_MEMORY_LIMIT_BYTES: String(16 * 1024 * 1024) } });
    ({ key } = await server.account());
  }, 60_000);
  afterAll(async () => {
    await server?.dispose();
  });

  it.runIf(haveRepro)(
    'the 2^31-1 length: four verifies at once report content_credentials_malformed, protect refuses it (422); valid credentials still read; /metrics counts the replaced workers',
    async () => {
      const hostile = await cborLength(2 ** 31 - 1);
      const answers = await Promise.all(Array.from({ length: 4 }, () => api(server, 'verify', key, imageForm(hostile), {})));
      for (const a of answers) {
        expect(a.status).toBe(200);
        expect(a.json.c2pa).toEqual({ present: true, valid: false, trainingMining: null });
        expect(a.json.warnings.map((w: { code: string }) => w.code)).toContain('content_credentials_malformed');
      }
      const p = await api(server, 'protect', key, imageForm(hostile));
      expectError(p, 422, 'content_credentials_malformed');
      const v = await api(server, 'verify', key, imageForm(CAWG()));
      expect(v.status).toBe(200);
      expect(v.json.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
      const metrics = (await request(server, '/metrics')).body.toString();
      // Each worker that ran a task passed the limit and was replaced (a task that landed on it before
      // it was marked runs there first: a replacement counts once).
      const recycles = Number(/^optmark_pool_memory_recycles (\d+)/m.exec(metrics)?.[1]);
      expect(recycles).toBeGreaterThanOrEqual(2);
      expect(metrics).toMatch(/^optmark_pool_worker_memory_max_bytes \d+/m);
      expect((await request(server, '/readyz')).status).toBe(200);
    },
    120_000,
  );
});
