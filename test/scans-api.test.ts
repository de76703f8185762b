/**
 * The scans API end to end on the real server (`npm run build` first), on SQLite and on PostgreSQL: a
 * file:// folder (OPTMARK_SCAN_ALLOW_LOCAL) with images marked by `optmark mark` (fingerprint and
 * provenance), one stripped by ExifTool, a plain one and a broken one, scanned to exact counts; the
 * results as JSON pages, CSV and JSONL; the daily limit (429 with Retry-After and resetsAt); the service
 * ceiling (paused, started once the scans' clock passes UTC midnight, through a restart); another
 * account's scan 404; cancel; bad sources; account deletion removing its scans.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBinary, TempDirs } from './helpers/files.js';
import { ROOT, TestServer, waitFor } from './helpers/server.js';
import { createTestDatabase, ENGINES } from './helpers/stores.js';

const EXIFTOOL = join(ROOT, 'node_modules', 'exiftool-vendored.pl', 'bin', 'exiftool');
const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const NATURAL = join(import.meta.dirname, '..', '..', 'shared', 'natural');
const temp = new TempDirs('optmark-scans-api-');
afterAll(() => temp.removeAll());

/** Noon of a day far ahead, and one second past the next midnight, as offsets of the scans' clock. */
const NOON = Date.UTC(2031, 5, 15, 12);
const AFTER_MIDNIGHT = Date.UTC(2031, 5, 16, 0, 0, 1);
const offsetTo = (t: number): string => String(t - Date.now());

describe.each(ENGINES)('scans API (%s)', (engine) => {
  let server: TestServer;
  let db: { url: string; drop: () => Promise<void> } | undefined;
  let photos: string;
  let key: string;

  const call = async (k: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(server.url(path), {
      method,
      headers: { Authorization: `Bearer ${k}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    const type = r.headers.get('content-type') ?? '';
    return { status: r.status, headers: r.headers, text, json: type.startsWith('application/json') ? JSON.parse(text) : undefined };
  };
  const finished = (k: string, id: string) =>
    waitFor(
      `scan ${id} to finish`,
      async () => {
        const s = (await call(k, 'GET', `/api/v1/scans/${id}`)).json;
        return ['done', 'failed', 'cancelled'].includes(s.state) ? s : undefined;
      },
      60_000,
    );

  beforeAll(async () => {
    const env: Record<string, string> = { OPTMARK_POOL_SIZE: '2', OPTMARK_SCAN_ALLOW_LOCAL: 'on', OPTMARK_SCAN_DAILY_LIMIT: '10' };
    if (engine === 'postgres') {
      db = await createTestDatabase();
      env.OPTMARK_DATABASE_URL = db.url;
    }
    server = await TestServer.start({ env });
    const markEnv = { ...env, OPTMARK_DATA_DIR: server.dataDir };
    const plain = temp.make();
    const noise = await sharp({ create: { width: 512, height: 384, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 35 } } })
      .jpeg({ quality: 92 })
      .toBuffer();
    writeFileSync(join(plain, 'photo.jpg'), noise);
    const marked = temp.make();
    const m = await runBinary(['mark', plain, '--out', marked, '--fingerprint', '--provenance'], { env: markEnv });
    expect(m.status, m.stderr).toBe(0);
    photos = temp.make();
    copyFileSync(join(marked, 'photo.jpg'), join(photos, 'marked.jpg'));
    copyFileSync(join(marked, 'photo.jpg'), join(photos, 'stripped.jpg'));
    expect(spawnSync(EXIFTOOL, ['-all=', '-overwrite_original', join(photos, 'stripped.jpg')]).status).toBe(0);
    copyFileSync(join(plain, 'photo.jpg'), join(photos, 'plain.jpg'));
    copyFileSync(join(CORPUS, 'pillow_broken.png'), join(photos, 'broken.png'));
    writeFileSync(join(photos, 'readme.txt'), 'not an image');
    key = (await server.account()).key;
  }, 180_000);
  afterAll(async () => {
    await server?.dispose();
    await db?.drop();
  });

  it('a file:// folder end to end: 202, done, exact counts; results as JSON pages, CSV and JSONL; 404 for another account', async () => {
    const source = pathToFileURL(photos).href;
    const created = await call(key, 'POST', '/api/v1/scans', { source, options: {} });
    expect(created.status).toBe(202);
    expect(created.json).toMatchObject({ state: 'queued', source, progress: 0, error: null, startedAt: null });
    const scan = await finished(key, created.json.id);
    expect(scan.state).toBe('done');
    expect(scan.counts).toEqual({ images: 4, optedOut: 1, servedOptOut: 0, noOptOut: 2, ours: 2, oursStripped: 1, failed: 1, skipped: 0, inVault: 0 });
    expect(scan.progress).toBe(4);
    expect(Date.parse(scan.finishedAt)).toBeGreaterThanOrEqual(Date.parse(scan.startedAt));

    const page1 = await call(key, 'GET', `/api/v1/scans/${scan.id}/results?limit=3`);
    expect(page1.status).toBe(200);
    expect(page1.json.items.map((i: { location: string }) => i.location.split('/').pop())).toEqual(['broken.png', 'marked.jpg', 'plain.jpg']);
    const page2 = await call(key, 'GET', `/api/v1/scans/${scan.id}/results?limit=3&cursor=${page1.json.nextCursor}`);
    expect(page2.json.items.map((i: { location: string }) => i.location.split('/').pop())).toEqual(['stripped.jpg']);
    expect(page2.json.nextCursor).toBeNull();
    const [broken, markedItem, plainItem, stripped] = [...page1.json.items, ...page2.json.items];
    expect(broken.error.code).toBeTypeOf('string');
    expect(markedItem).toMatchObject({ optedOut: true, error: null, format: 'jpeg', provenance: { present: true, valid: true } });
    // This account keeps no vault originals: no vault was searched.
    expect(markedItem.vault).toBeNull();
    expect(stripped).toMatchObject({ optedOut: false, error: null, fingerprint: { present: true } });
    expect(plainItem).toMatchObject({ optedOut: false, fingerprint: { present: false } });
    expect(markedItem.sha256).toBe(createHashOf(readFileSync(join(photos, 'marked.jpg'))));

    const csv = await call(key, 'GET', `/api/v1/scans/${scan.id}/results?format=csv`);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = csv.text.trimEnd().split('\r\n');
    expect(rows[0]).toBe('location,sha256,format,optedOut,signals,servedSignals,ours,record,vaultOriginal,vaultName,errorCode,errorMessage');
    expect(rows).toHaveLength(5);
    expect(rows[4]).toContain(',false,,,true,,,');
    const jsonl = await call(key, 'GET', `/api/v1/scans/${scan.id}/results?format=jsonl`);
    const lines = jsonl.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.sha256)).toEqual([broken.sha256, markedItem.sha256, plainItem.sha256, stripped.sha256]);

    const other = (await server.account()).key;
    for (const path of [`/api/v1/scans/${scan.id}`, `/api/v1/scans/${scan.id}/results`]) {
      const r = await call(other, 'GET', path);
      expect([r.status, r.json.code]).toEqual([404, 'not_found']);
    }
    expect((await call(other, 'DELETE', `/api/v1/scans/${scan.id}`)).status).toBe(404);
    expect((await call(other, 'GET', '/api/v1/scans')).json.scans).toEqual([]);
  }, 120_000);

  it("an account's vault originals are recognised in a scan: resized, re-encoded, stripped; an unrelated photo is not", async () => {
    const owner = (await server.account()).key;
    expect((await call(owner, 'PUT', '/api/v1/vault', { enabled: true })).status).toBe(200);
    const original = await sharp(join(NATURAL, 'kodim03.png')).jpeg({ quality: 95 }).toBuffer();
    const form = new FormData();
    form.append('image', new Blob([new Uint8Array(original)], { type: 'image/jpeg' }), 'hats.jpg');
    const kept = await fetch(server.url('/api/v1/vault/objects'), { method: 'POST', headers: { Authorization: `Bearer ${owner}` }, body: form });
    expect(kept.status).toBe(201);
    const object = (await kept.json()) as { id: string };
    const folder = temp.make();
    // What a dataset keeps of it: two thirds the size, JPEG 70, no metadata; and a photograph not in the vault.
    writeFileSync(join(folder, 'a-copy.jpg'), await sharp(original).resize(512).jpeg({ quality: 70 }).toBuffer());
    writeFileSync(join(folder, 'b-other.jpg'), await sharp(join(NATURAL, 'kodim01.png')).jpeg({ quality: 80 }).toBuffer());
    const created = await call(owner, 'POST', '/api/v1/scans', { source: pathToFileURL(folder).href });
    expect(created.status).toBe(202);
    const scan = await finished(owner, created.json.id);
    expect(scan.counts).toMatchObject({ images: 2, inVault: 1, failed: 0 });
    const [copy, other] = (await call(owner, 'GET', `/api/v1/scans/${scan.id}/results`)).json.items;
    expect(copy.vault).toHaveLength(1);
    expect(copy.vault[0]).toMatchObject({ id: object.id, name: 'hats.jpg', record: null });
    expect(copy.vault[0].distance).toBeLessThanOrEqual(48);
    expect(other.vault).toEqual([]);
    const csv = (await call(owner, 'GET', `/api/v1/scans/${scan.id}/results?format=csv`)).text.trimEnd().split('\r\n');
    expect(csv[1]).toContain(`,${object.id},hats.jpg,`);
  }, 120_000);

  it('bad bodies and sources: 400 with stable codes; nothing is counted for them', async () => {
    const k = (await server.account()).key;
    const cases: [unknown, string][] = [
      [{ source: 'ftp://example.com/x' }, 'invalid_source'],
      [{ source: '' }, 'invalid_source'],
      [{ source: 'https://user:pw@example.com/' }, 'invalid_source'],
      [{ source: 'https://example.com/', options: { maxImages: -1 } }, 'invalid_request'],
      [{ source: 'https://example.com/', options: { nope: 1 } }, 'invalid_request'],
      [{ source: 'https://example.com/', options: { perHostDelayMs: 60_001 } }, 'invalid_request'],
      [{ source: 'https://example.com/', extra: 1 }, 'invalid_request'],
    ];
    for (const [body, code] of cases) {
      const r = await call(k, 'POST', '/api/v1/scans', body);
      expect([r.status, r.json.code], JSON.stringify(body)).toEqual([400, code]);
    }
    expect((await call(k, 'GET', '/api/v1/scans')).json.scans).toEqual([]);
    expect((await call('om_nokey', 'GET', '/api/v1/scans')).status).toBe(401);
  });

  it('10 scans a day, the 11th is 429 scan_limit_exceeded with resetsAt and Retry-After; listed newest first, cursor paged; cancel', async () => {
    const k = (await server.account()).key;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await call(k, 'POST', '/api/v1/scans', { source: pathToFileURL(photos).href, options: { maxImages: 1 } });
      expect(r.status).toBe(202);
      ids.push(r.json.id);
    }
    const over = await call(k, 'POST', '/api/v1/scans', { source: pathToFileURL(photos).href });
    expect([over.status, over.json.code]).toEqual([429, 'scan_limit_exceeded']);
    const resetsAt = Date.parse(over.json.resetsAt);
    expect(new Date(resetsAt).toISOString().slice(11)).toBe('00:00:00.000Z');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(86_400);

    const first = await call(k, 'GET', '/api/v1/scans?limit=4');
    const seen: string[] = first.json.scans.map((s: { id: string }) => s.id);
    let cursor = first.json.nextCursor;
    while (cursor) {
      const next = await call(k, 'GET', `/api/v1/scans?limit=4&cursor=${cursor}`);
      seen.push(...next.json.scans.map((s: { id: string }) => s.id));
      cursor = next.json.nextCursor;
    }
    expect(seen).toEqual([...ids].reverse());
    expect((await call(k, 'GET', '/api/v1/scans?cursor=garbage')).json.code).toBe('invalid_query');

    const cancelled = await call(k, 'DELETE', `/api/v1/scans/${ids[9]}`);
    expect(cancelled.status).toBe(200);
    expect(['cancelled', 'done']).toContain(cancelled.json.state);
    const end = await finished(k, ids[9]!);
    expect(end.state).toBe(cancelled.json.state);
    const again = await call(k, 'DELETE', `/api/v1/scans/${ids[9]}`);
    expect(again.json.state).toBe(cancelled.json.state);
    const done = await finished(k, ids[0]!);
    expect(done.counts.images).toBe(1);
  }, 120_000);

  it("past the service's daily ceiling scans are accepted paused and start, oldest first, once the day turns", async () => {
    await server.stop();
    server.env.OPTMARK_SCAN_SERVICE_DAILY_LIMIT = '2';
    server.env.OPTMARK_SCAN_CLOCK_OFFSET_MS = offsetTo(NOON);
    await server.restart();
    const k = (await server.account()).key;
    const states: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call(k, 'POST', '/api/v1/scans', { source: pathToFileURL(photos).href, options: { maxImages: 2 } });
      expect(r.status).toBe(202);
      states.push(r.json.state);
      ids.push(r.json.id);
    }
    expect(states).toEqual(['queued', 'queued', 'paused', 'paused']);
    expect((await finished(k, ids[0]!)).state).toBe('done');
    expect((await call(k, 'GET', `/api/v1/scans/${ids[2]}`)).json.state).toBe('paused');
    await server.stop();
    server.env.OPTMARK_SCAN_CLOCK_OFFSET_MS = offsetTo(AFTER_MIDNIGHT);
    await server.restart();
    const third = await finished(k, ids[2]!);
    const fourth = await finished(k, ids[3]!);
    expect([third.state, fourth.state]).toEqual(['done', 'done']);
    expect(third.counts.images).toBe(2);
    expect(Date.parse(third.startedAt)).toBeGreaterThanOrEqual(Date.UTC(2031, 5, 16));
    // The new day's ceiling holds the two it started: a fifth scan is paused again.
    const fifth = await call(k, 'POST', '/api/v1/scans', { source: pathToFileURL(photos).href });
    expect(fifth.json.state).toBe('paused');
  }, 180_000);

  it('local sources need OPTMARK_SCAN_ALLOW_LOCAL; deleting an account deletes its scans', async () => {
    await server.stop();
    delete server.env.OPTMARK_SCAN_SERVICE_DAILY_LIMIT;
    delete server.env.OPTMARK_SCAN_CLOCK_OFFSET_MS;
    await server.restart();
    const { name, key: k } = await server.account();
    const r = await call(k, 'POST', '/api/v1/scans', { source: pathToFileURL(photos).href, options: { maxImages: 1 } });
    expect(r.status).toBe(202);
    await finished(k, r.json.id);
    await deleteAccount(name);
    expect(await countScans(r.json.id)).toBe(0);

    await server.stop();
    delete server.env.OPTMARK_SCAN_ALLOW_LOCAL;
    await server.restart();
    const k2 = (await server.account()).key;
    for (const source of [pathToFileURL(photos).href, photos]) {
      const refused = await call(k2, 'POST', '/api/v1/scans', { source });
      expect([refused.status, refused.json.code]).toEqual([400, 'local_source_not_allowed']);
    }
  }, 120_000);

  async function onDb<T>(f: (q: (sql: string, params: unknown[]) => Promise<unknown[]>) => Promise<T>): Promise<T> {
    if (engine === 'sqlite') {
      const d = new Database(join(server.dataDir, 'optmark.db'));
      d.pragma('foreign_keys = ON');
      try {
        return await f(async (sql, params) => {
          const s = d.prepare(sql.replace(/\$\d+/g, '?'));
          if (s.reader) return s.all(...params);
          s.run(...params);
          return [];
        });
      } finally {
        d.close();
      }
    }
    const c = new pg.Client({ connectionString: db!.url });
    await c.connect();
    try {
      return await f(async (sql, params) => (await c.query(sql, params)).rows);
    } finally {
      await c.end();
    }
  }
  const deleteAccount = (name: string) => onDb((q) => q('DELETE FROM accounts WHERE name = $1', [name]));
  const countScans = (id: string) =>
    onDb(async (q) => {
      const [a] = (await q('SELECT count(*) AS n FROM scans WHERE id = $1', [id])) as { n: number | string }[];
      const [b] = (await q('SELECT count(*) AS n FROM scan_items WHERE scan_id = $1', [id])) as { n: number | string }[];
      return Number(a!.n) + Number(b!.n);
    });
});

function createHashOf(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
