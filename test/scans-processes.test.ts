/**
 * Two `optmark serve` processes on one PostgreSQL database (`npm run build` first): the first takes a
 * scan's first chunk and is killed with -9 mid-scan; the second takes the chunk over when its lease runs
 * out, and every image is reported exactly once, with exact counts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TempDirs } from './helpers/files.js';
import { TestServer, waitFor } from './helpers/server.js';
import { createTestDatabase } from './helpers/stores.js';

const IMAGES = 60;
const temp = new TempDirs('optmark-scans-procs-');

describe('scans on two instances (PostgreSQL)', () => {
  let db: { url: string; drop: () => Promise<void> };
  const servers: TestServer[] = [];
  let folder: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    folder = temp.make();
    for (let i = 0; i < IMAGES; i++) {
      const img = await sharp({ create: { width: 64 + i, height: 48, channels: 3, background: { r: i * 4, g: 90, b: 200 - i * 3 } } })
        .jpeg()
        .toBuffer();
      writeFileSync(join(folder, `img-${String(i).padStart(3, '0')}.jpg`), img);
    }
  }, 60_000);
  afterAll(async () => {
    for (const s of servers) await s.dispose();
    await db?.drop();
    temp.removeAll();
  });

  it('an instance killed with -9 mid-scan loses only its lease: the other finishes, every image once', async () => {
    const env = { OPTMARK_DATABASE_URL: db.url, OPTMARK_POOL_SIZE: '1', OPTMARK_SCAN_ALLOW_LOCAL: 'on' };
    const first = await TestServer.start({ env: { ...env } });
    servers.push(first);
    const { key } = await first.account();
    const auth = { Authorization: `Bearer ${key}` };
    const post = await fetch(first.url('/api/v1/scans'), {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ source: pathToFileURL(folder).href }),
    });
    expect(post.status).toBe(202);
    const { id } = (await post.json()) as { id: string };
    await waitFor('the first instance to take a chunk', async () => {
      const s = (await (await fetch(first.url(`/api/v1/scans/${id}`), { headers: auth })).json()) as { state: string };
      return s.state === 'running' ? true : undefined;
    });
    expect((await first.stop('SIGKILL')).signal).toBe('SIGKILL');

    const second = await TestServer.start({ env: { ...env } });
    servers.push(second);
    const scan = await waitFor(
      'the second instance to finish the scan',
      async () => {
        const s = (await (await fetch(second.url(`/api/v1/scans/${id}`), { headers: auth })).json()) as {
          state: string;
          progress: number;
          counts: Record<string, number>;
        };
        return s.state === 'done' ? s : undefined;
      },
      120_000,
    );
    expect(scan.progress).toBe(IMAGES);
    expect(scan.counts).toMatchObject({ images: IMAGES, failed: 0, noOptOut: IMAGES });
    const jsonl = await (await fetch(second.url(`/api/v1/scans/${id}/results?format=jsonl`), { headers: auth })).text();
    const items = jsonl
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { index: number; location: string });
    expect(items.map((i) => i.index)).toEqual([...Array(IMAGES).keys()]);
    expect(new Set(items.map((i) => i.location)).size).toBe(IMAGES);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const rows = (await c.query('SELECT count(*)::int AS n, count(DISTINCT idx)::int AS d FROM scan_items WHERE scan_id = $1', [id])).rows[0];
      expect(rows).toEqual({ n: IMAGES, d: IMAGES });
    } finally {
      await c.end();
    }
  }, 240_000);
});
