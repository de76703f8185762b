// The dashboard's Scans tab in Debian's Chromium against the real server: a scan of a page on a real
// loopback site (images marked by this server, one of them stripped of its metadata, one opted out with
// the IPTC field only, one served with X-Robots-Tag: noai, a plain one and a missing one), its progress
// to done, the summary, the table's filters, the CSV read back, the 360 px layout and contrast, the
// keyboard. Screenshots go to test-artifacts/dashboard-scans/ (gitignored).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../helpers/assert.js';
import { download, launch, lowContrast, newPage, pageWidth, shots, signIn } from '../helpers/browser.js';
import { ROOT, TestServer, api, imageForm, request } from '../helpers/server.js';

const NATURAL = join(ROOT, '..', 'shared', 'natural');
const shot = shots('dashboard-scans');

let server: TestServer;
let key: string;
let site: Server;
let origin: string;
let browser: Browser;
let work: string;
const errors: string[] = [];

/** What the site serves: path -> bytes, type and extra headers. */
const files = new Map<string, { body: Buffer; type: string; headers?: Record<string, string> }>();
/** The images on the page and what each must come out as. */
const expected: Record<string, { sha256: string | null; optedOut: boolean; served: boolean; ours: boolean; failed: boolean }> = {};

async function markWith(layers: { provenance: boolean; fingerprint: boolean }, image: Buffer, name: string, type: string): Promise<Buffer> {
  const auth = { Authorization: `Bearer ${key}` };
  const batch = await request(server, '/api/v1/dashboard/batches', {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: Buffer.from(JSON.stringify({ size: 1, ...layers })),
  });
  expect(batch.status).toBe(201);
  const form = imageForm(image, name, type);
  const marked = await request(server, `/api/v1/dashboard/batches/${batch.json.id}/images`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': form.contentType },
    body: form.body,
  });
  expect(marked.status).toBe(200);
  return Buffer.from(marked.json.imageBase64, 'base64');
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'optmark-scans-ui-'));
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2', OPTMARK_SCAN_ALLOW_NETWORKS: '127.0.0.0/8' } });
  ({ key } = await server.account());
  const photo = (n: number, width: number, format: 'jpeg' | 'png' | 'webp') =>
    sharp(join(NATURAL, `kodim0${n}.png`))
      .resize({ width })
      .toFormat(format)
      .toBuffer();

  // Marked here with the provenance tag: ours, opted out, and the account's record.
  const ours = await markWith({ provenance: true, fingerprint: false }, await photo(1, 512, 'jpeg'), 'ours.jpg', 'image/jpeg');
  // Marked here with the fingerprint, then every metadata block removed (ExifTool -all=): ours, stripped.
  const fingerprinted = await markWith({ provenance: false, fingerprint: true }, await photo(2, 768, 'png'), 'stripped.png', 'image/png');
  const strippedPath = join(work, 'stripped.png');
  writeFileSync(strippedPath, fingerprinted);
  execFileSync('exiftool', ['-q', '-overwrite_original', '-all=', strippedPath]);
  const stripped = readFileSync(strippedPath);
  // The IPTC field only (POST /api/v1/protect): opted out, not ours.
  const protectedAnswer = await api(server, 'protect', key, imageForm(await photo(3, 400, 'jpeg'), 'iptc.jpg'));
  expect(protectedAnswer.status).toBe(200);
  const iptc = Buffer.from(protectedAnswer.json.imageBase64, 'base64');
  const noai = await photo(4, 300, 'webp');
  const plain = await photo(5, 300, 'jpeg');

  files.set('/img/ours.jpg', { body: ours, type: 'image/jpeg' });
  files.set('/img/stripped.png', { body: stripped, type: 'image/png' });
  files.set('/img/iptc.jpg', { body: iptc, type: 'image/jpeg' });
  files.set('/img/noai.webp', { body: noai, type: 'image/webp', headers: { 'X-Robots-Tag': 'noai' } });
  files.set('/img/plain.jpg', { body: plain, type: 'image/jpeg' });
  files.set('/robots.txt', { body: Buffer.from('User-agent: *\nAllow: /\n'), type: 'text/plain' });
  const page = `<!doctype html><html><head><title>Gallery</title></head><body>
    <img src="/img/ours.jpg" alt=""><img src="/img/stripped.png" alt="">
    <picture><source srcset="/img/iptc.jpg"><img src="/img/plain.jpg" alt=""></picture>
    <img src="/img/noai.webp" alt=""><img src="/img/missing.jpg" alt="">
  </body></html>`;
  files.set('/gallery.html', { body: Buffer.from(page), type: 'text/html; charset=utf-8' });

  site = createServer((req, res) => {
    const f = files.get((req.url ?? '/').split('?')[0]!);
    if (!f) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'Content-Type': f.type, 'Content-Length': f.body.length, ...f.headers }).end(f.body);
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

  const at = (p: string) => `${origin}${p}`;
  expected[at('/img/ours.jpg')] = { sha256: sha256(ours), optedOut: true, served: false, ours: true, failed: false };
  expected[at('/img/stripped.png')] = { sha256: sha256(stripped), optedOut: false, served: false, ours: true, failed: false };
  expected[at('/img/iptc.jpg')] = { sha256: sha256(iptc), optedOut: true, served: false, ours: false, failed: false };
  expected[at('/img/plain.jpg')] = { sha256: sha256(plain), optedOut: false, served: false, ours: false, failed: false };
  expected[at('/img/noai.webp')] = { sha256: sha256(noai), optedOut: false, served: true, ours: false, failed: false };
  expected[at('/img/missing.jpg')] = { sha256: null, optedOut: false, served: false, ours: false, failed: true };
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.dispose();
  await new Promise((resolve) => (site ? site.close(resolve) : resolve(undefined)));
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Parses RFC 4180 CSV (quoted fields, doubled quotes, CRLF or LF). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field || row.length) rows.push([...row, field]);
  return rows;
}

describe('the Scans tab in Chromium', () => {
  it('starts a scan of a loopback page, follows it to done, shows the summary, filters the table and downloads the CSV', async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    const page = await newPage(context, errors);
    await signIn(page, server, key);
    await page.getByRole('tab', { name: 'Scans' }).click();
    await page.getByText('No scans yet.').waitFor();
    await shot(page, '01-empty');

    const source = `${origin}/gallery.html`;
    await page.getByLabel('Source URL').fill(source);
    await page.getByRole('button', { name: 'Start scan' }).click();
    // The scan shows up as the current one and its progress is announced politely until it is done.
    const detail = page.locator('section.scan-detail');
    await detail.getByRole('heading', { name: `Scan of ${source}` }).waitFor();
    const live = detail.locator('.scan-progress [role=status]');
    expect(await live.getAttribute('aria-live')).toBe('polite');
    await detail.locator('.badge.state-done').first().waitFor({ timeout: 120_000 });
    expect(await live.textContent()).toMatch(/^Done\. \d+ images? checked\.$/);

    // The summary: each count as the API's, and as the site was built.
    const api = await page.evaluate(async (k) => (await (await fetch('/api/v1/scans', { headers: { Authorization: `Bearer ${k}` } })).json()).scans, key);
    expect(api).toHaveLength(1);
    const scan = api[0];
    expect(scan).toMatchObject({ state: 'done', source, error: null });
    const want = Object.values(expected);
    const readable = want.filter((e) => !e.failed);
    expect(scan.counts).toMatchObject({
      images: want.length,
      optedOut: readable.filter((e) => e.optedOut).length,
      servedOptOut: readable.filter((e) => e.served).length,
      noOptOut: readable.filter((e) => !e.optedOut && !e.served).length,
      ours: readable.filter((e) => e.ours).length,
      oursStripped: readable.filter((e) => e.ours && !e.optedOut).length,
      failed: want.filter((e) => e.failed).length,
    });
    for (const k of ['images', 'optedOut', 'servedOptOut', 'noOptOut', 'ours', 'oursStripped', 'failed']) {
      expect(await detail.locator(`[data-count=${k}]`).textContent(), k).toBe(String(scan.counts[k]));
    }
    // The stripped one is flagged in the summary.
    expect(await detail.locator('.count.oursStripped.alert').count()).toBe(1);

    // The table: every image once; each filter shows as many rows as its count says, and the right ones.
    const rows = detail.locator('table.items tbody tr');
    await expect.poll(() => rows.count()).toBe(want.length);
    await shot(page, '02-done');
    const locations = async () => rows.locator('.location').allTextContents();
    expect((await locations()).sort()).toEqual(Object.keys(expected).sort());
    const filterTo = async (label: string) => {
      await detail.getByLabel('Show').selectOption({ label });
      await page.waitForFunction(() => true);
    };
    const cases: Array<[string, (e: (typeof want)[number]) => boolean, string]> = [
      ['Opted out (embedded)', (e) => !e.failed && e.optedOut, 'optedOut'],
      ['Opted out (served)', (e) => !e.failed && e.served, 'servedOptOut'],
      ['No opt-out', (e) => !e.failed && !e.optedOut && !e.served, 'noOptOut'],
      ['Marked by this server', (e) => !e.failed && e.ours, 'ours'],
      ['Ours, opt-out stripped', (e) => !e.failed && e.ours && !e.optedOut, 'oursStripped'],
      ['Failed', (e) => e.failed, 'failed'],
    ];
    for (const [label, rule, count] of cases) {
      await filterTo(label);
      const names = Object.entries(expected)
        .filter(([, e]) => rule(e))
        .map(([l]) => l)
        .sort();
      await expect.poll(async () => (await locations()).sort(), label).toEqual(names);
      expect(names.length, label).toBe(scan.counts[count]);
    }
    await filterTo('Ours, opt-out stripped');
    expect(await rows.first().textContent()).toContain('Ours, opt-out stripped');
    await shot(page, '03-filter-stripped');
    // The text filter, on top of the category.
    await filterTo('All images');
    await detail.getByLabel('Location, SHA-256 or served signal contains').fill('noai');
    await expect.poll(locations).toEqual([`${origin}/img/noai.webp`]);
    expect(await rows.first().textContent()).toContain('x-robots-tag:noai');
    await detail.getByLabel('Location, SHA-256 or served signal contains').fill(expected[`${origin}/img/ours.jpg`]!.sha256!.slice(0, 12));
    await expect.poll(locations).toEqual([`${origin}/img/ours.jpg`]);
    await detail.getByLabel('Location, SHA-256 or served signal contains').fill('');

    // The CSV: one row per image, with its SHA-256 and verdict.
    const csv = await download(page, () => detail.getByRole('button', { name: 'Download CSV' }).click(), join(work, 'downloads'));
    expect(csv.name).toMatch(/\.csv$/);
    const [header, ...body] = parseCsv(readFileSync(csv.path, 'utf8')).filter((r) => r.some((f) => f !== ''));
    const col = (name: string) => {
      const i = header!.indexOf(name);
      expect(i, `CSV column ${name} in ${header!.join(',')}`).toBeGreaterThanOrEqual(0);
      return i;
    };
    const [loc, sha, opted] = [col('location'), col('sha256'), col('optedOut')];
    expect(body).toHaveLength(want.length);
    for (const r of body) {
      const e = expected[r[loc]!];
      expect(e, r[loc]).toBeDefined();
      expect(r[sha] || null).toBe(e!.sha256);
      if (!e!.failed) expect(r[opted]).toBe(String(e!.optedOut));
    }

    expect(await lowContrast(page)).toEqual([]);
    await context.close();
    // The one refused request (the ftp source's 400) is what Chromium logs; nothing else may be.
    expect(errors.filter((e) => e !== 'Failed to load resource: the server responded with a status of 400 (Bad Request)')).toEqual([]);
    expect(errors.length).toBeLessThanOrEqual(1);
  }, 300_000);

  it('fits a 360 px screen, and works from the keyboard: the source field, the start button, the filter', async () => {
    const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await newPage(context, errors);
    await signIn(page, server, key);
    const tab = page.getByRole('tab', { name: 'Scans' });
    await tab.focus();
    // Arrow keys move along the tab list: from Scans to Vault and back.
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tab-vault');
    await page.keyboard.press('ArrowLeft');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tab-scans');
    expect(await tab.getAttribute('aria-selected')).toBe('true');
    // The earlier scan is listed; open it with Enter and read its table as cards.
    const open = page.locator('.scan-open').first();
    await open.waitFor();
    await open.focus();
    await page.keyboard.press('Enter');
    const rows = page.locator('table.items tbody tr');
    await expect.poll(() => rows.count()).toBe(Object.keys(expected).length);
    expect(await pageWidth(page)).toBeLessThanOrEqual(360);
    await page.locator('#scan-filter').focus();
    await page.keyboard.press('End'); // the last option: Skipped (Git LFS pointers); one up: Failed
    await page.keyboard.press('ArrowUp');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle)).not.toBe('none');
    expect(await pageWidth(page)).toBeLessThanOrEqual(360);
    await shot(page, '04-mobile');
    expect(await lowContrast(page)).toEqual([]);
    // A source that is not a URL the server takes: the page says why, nothing starts.
    await page.locator('#scan-source').fill('ftp://example.com/x');
    await page.locator('#scan-source').press('Enter');
    await page.getByText(/^The scan was not started: /).waitFor();
    await shot(page, '05-refused');
    await context.close();
    // The one refused request (the ftp source's 400) is what Chromium logs; nothing else may be.
    expect(errors.filter((e) => e !== 'Failed to load resource: the server responded with a status of 400 (Bad Request)')).toEqual([]);
    expect(errors.length).toBeLessThanOrEqual(1);
  }, 300_000);
});
