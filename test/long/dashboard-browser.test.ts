// The dashboard in Debian's Chromium (playwright-core; never a downloaded browser): sign in, a batch of
// 25 files with one non-image and both layers on, every good file downloaded and read back with
// ExifTool and the API's verify, the ZIP and the PDF receipt opened and checked, history, inspect and
// usage, the 26-file refusal, a keyboard-only pass, the 360 px layout and text contrast, the TDMRep and
// Content Credentials boxes. Screenshots go to test-artifacts/dashboard/ (gitignored) for people to look at.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExifTool } from 'exiftool-vendored';
import { chromium, type Browser, type BrowserContext, type Download, type FileChooser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../helpers/assert.js';
import { exiftoolDataMining } from '../helpers/oracle.js';
import { read } from '../helpers/c2pa.js';
import { pdfText } from '../helpers/pdf.js';
import { lowContrast } from '../helpers/browser.js';
import { ROOT, TestServer, api, imageForm } from '../helpers/server.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const NATURAL = join(ROOT, '..', 'shared', 'natural');
const SHOTS = join(ROOT, 'test-artifacts', 'dashboard');
const PROHIBITED = 'DMI-PROHIBITED-AIMLTRAINING';

let server: TestServer;
let key: string;
let account: string;
let browser: Browser;
let work: string;
let et: ExifTool;
const consoleErrors: string[] = [];
const good: string[] = [];
let bad: string;

/** A page that records console errors and uncaught exceptions (any is a failure). */
async function newPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  return page;
}

async function signIn(page: Page): Promise<void> {
  await page.goto(server.url('/'), { waitUntil: 'networkidle' });
  const field = page.getByLabel('API key');
  await field.fill(key);
  await field.press('Enter');
  await page.getByRole('tab', { name: 'Protect' }).waitFor();
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/**
 * Clicks `trigger` and saves the download it starts (named `expected`, when given). Chromium now and then
 * lets a click on a download control go by without starting a download (seen under load, on a link of a
 * finished batch that the previous and next clicks download fine); like a person, the test clicks again,
 * up to three times, and only a download of the expected name counts.
 */
async function download(page: Page, trigger: () => Promise<void>, dir: string, expected?: string): Promise<{ path: string; name: string }> {
  const predicate = (d: Download) => expected === undefined || d.suggestedFilename() === expected;
  let d: Download | undefined;
  for (let attempt = 1; d === undefined; attempt++) {
    const started = page.waitForEvent('download', { predicate, timeout: 10_000 });
    await trigger();
    try {
      d = await started;
    } catch (err) {
      if (attempt === 3) throw err;
      console.warn(`no download ${attempt} time(s) after a click${expected ? ` on ${expected}` : ''}: clicking again`);
    }
  }
  const path = join(dir, d.suggestedFilename());
  await d.saveAs(path);
  return { path, name: d.suggestedFilename() };
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (npm test does, as root)`);
  mkdirSync(SHOTS, { recursive: true });
  work = mkdtempSync(join(tmpdir(), 'optmark-browser-'));
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2' } });
  ({ key, name: account } = await server.account());
  // 24 real photos in the three formats (the Kodak set, scaled to keep the batch quick) and one text file.
  const photos = readdirPng(NATURAL);
  for (let i = 0; i < 24; i++) {
    const format = (['jpeg', 'png', 'webp'] as const)[i % 3]!;
    const out = join(work, `photo-${String(i).padStart(2, '0')}.${format === 'jpeg' ? 'jpg' : format}`);
    await sharp(join(NATURAL, photos[i % photos.length]!))
      .resize({ width: 384 + 16 * i })
      .toFormat(format)
      .toFile(out);
    good.push(out);
  }
  bad = join(work, 'notes.jpg');
  writeFileSync(bad, 'this is a text file, not a picture\n'.repeat(20));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  et = new ExifTool({ taskTimeoutMillis: 30_000 });
});

afterAll(async () => {
  await browser?.close();
  await et?.end();
  await server?.dispose();
  if (work) rmSync(work, { recursive: true, force: true });
});

function readdirPng(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.png'))
    .sort();
}

describe('the dashboard in Chromium', () => {
  it('marks a batch of 25 with one non-image and both layers; every download, the ZIP and the receipt check out', async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    const page = await newPage(context);
    const response = await page.goto(server.url('/'), { waitUntil: 'networkidle' });
    expect(response!.headers()['content-security-policy']).toContain("script-src 'self'");
    await shot(page, '01-sign-in');
    await signIn(page);
    // The key is in this tab's session storage, and nowhere in the URL.
    expect(await page.evaluate(() => sessionStorage.getItem('optmark.apiKey'))).toBe(key);
    expect(page.url()).not.toContain(key);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);

    const files = [...good.slice(0, 12), bad, ...good.slice(12)];
    expect(files).toHaveLength(25);
    await page.locator('input[type=file]').first().setInputFiles(files);
    await page.getByLabel('Provenance').check();
    await page.getByLabel('Fingerprint').check();
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.waitForFunction((n) => document.querySelectorAll('a[download]').length >= n, good.length, { timeout: 300_000 });
    await page.getByText(/Files \(24 of 25 protected, 1 failed\)/).waitFor();
    await expect.poll(() => page.getByRole('button', { name: /Download all/ }).isEnabled()).toBe(true);
    const failed = page.locator('li.file.failed');
    expect(await failed.count()).toBe(1);
    expect(await failed.textContent()).toMatch(/notes\.jpg[\s\S]*not a JPEG, PNG or WebP image/);
    await shot(page, '02-batch-done');

    // Every download: ExifTool reads the opt-out, the API finds a valid provenance tag and the
    // fingerprint, and the bytes are those the page showed the SHA-256 of.
    const dir = join(work, 'downloads');
    mkdirSync(dir);
    const links = await page.locator('a[download]').all();
    expect(links).toHaveLength(24);
    const downloaded = new Map<string, Buffer>();
    for (const link of links) {
      const { path, name } = await download(page, () => link.click(), dir, (await link.getAttribute('download')) ?? undefined);
      const bytes = readFileSync(path);
      downloaded.set(name, bytes);
      expect(await exiftoolDataMining(et, path)).toBe(PROHIBITED);
      const shown = await link.locator('xpath=..').locator('code.hash').textContent();
      expect(sha256(bytes)).toBe(shown);
      const v = await api(server, 'verify', key, imageForm(bytes, name));
      expect(v.status).toBe(200);
      expect(v.json).toMatchObject({ optedOut: true, provenance: { present: true, valid: true }, fingerprint: { present: true } });
      expect(v.json.record).toMatchObject({ layers: ['fingerprint', 'provenance'], producedName: name });
    }
    expect([...downloaded.keys()].sort()).toEqual(good.map((p) => p.split('/').pop()!).sort());

    // Download all: a ZIP holding the same 24 files (read with Python's zipfile, not our library).
    const zip = await download(page, () => page.getByRole('button', { name: /Download all/ }).click(), dir);
    expect(zip.name).toMatch(/\.zip$/);
    const listing = JSON.parse(
      execFileSync(
        'python3',
        [
          '-c',
          'import sys,zipfile,json,hashlib;z=zipfile.ZipFile(sys.argv[1]);print(json.dumps({i.filename:hashlib.sha256(z.read(i)).hexdigest() for i in z.infolist()}))',
          zip.path,
        ],
        {
          encoding: 'utf8',
        },
      ),
    ) as Record<string, string>;
    expect(Object.keys(listing).sort()).toEqual([...downloaded.keys()].sort());
    for (const [name, bytes] of downloaded) expect(listing[name]).toBe(sha256(bytes));

    // The PDF receipt names every produced file's SHA-256.
    const pdf = await download(page, () => page.getByRole('button', { name: 'PDF receipt' }).click(), dir);
    const pdfBytes = readFileSync(pdf.path);
    expect(pdfBytes.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    const text = await pdfText(pdfBytes);
    for (const bytes of downloaded.values()) expect(text).toContain(sha256(bytes));
    expect(text).toContain('Layers: fingerprint, provenance');
    expect(text).not.toContain('notes.jpg');

    // History: the 24 records, a search by SHA-256, an export.
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByText('24 records.').waitFor();
    const one = sha256(downloaded.values().next().value!);
    await page.getByLabel('Search by file name or SHA-256').fill(one.slice(0, 12));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText(/^1 record matching/).waitFor();
    expect(await page.locator('.records code.hash').allTextContents()).toEqual([one]);
    const csv = await download(page, () => page.getByRole('button', { name: 'Export CSV' }).click(), dir);
    expect(readFileSync(csv.path, 'utf8').trimEnd().split('\r\n')).toHaveLength(2);
    await shot(page, '03-history');

    // Inspect: verify's whole report, with the record of these bytes.
    await page.getByRole('tab', { name: 'Inspect' }).click();
    const [firstName, firstBytes] = [...downloaded.entries()][0]!;
    const inspected = join(dir, `inspect-${firstName}`);
    writeFileSync(inspected, firstBytes);
    // The Protect panel stays mounted (hidden) to keep its batch: pick the Inspect panel's own input.
    await page.locator('#inspect-files').setInputFiles([inspected]);
    await page.getByText(/Marked here on/).waitFor();
    expect(await page.locator('#panel-inspect .facts').first().textContent()).toMatch(/Valid[\s\S]*Present \(confidence/);
    await shot(page, '04-inspect');

    // Usage: 24 protections; 25 image checks (the 24 verify calls above, with the same key, and one Inspect).
    await page.getByRole('tab', { name: 'Usage' }).click();
    await page.getByText(/24 of 10,000 protections used/).waitFor();
    await page.getByText(/25 of 50,000 image checks used/).waitFor();
    const usage = await server.usage(account);
    expect(usage.protect.used).toBe(24);
    await shot(page, '05-usage');

    // The 25-image limit: 26 files are refused in the page, with the limit named.
    await page.reload({ waitUntil: 'networkidle' });
    await page.getByRole('tab', { name: 'Protect' }).waitFor(); // still signed in: the session kept the key
    const many = Array.from({ length: 26 }, (_, i) => {
      const p = join(work, `many-${i}.jpg`);
      writeFileSync(p, readFileSync(good[0]!));
      return p;
    });
    await page.locator('input[type=file]').first().setInputFiles(many);
    await page.getByText(/You chose 26 files, but a batch holds at most 25 images/).waitFor();
    expect(await page.locator('li.file').count()).toBe(0);
    await shot(page, '06-26-refused');

    // Text contrast: every visible text against its effective background is at least 4.5:1.
    expect(await lowContrast(page)).toEqual([]);
    await context.close();
    expect(consoleErrors).toEqual([]);
  }, 600_000);

  it('works with the keyboard alone, with a visible focus', async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1024, height: 800 } });
    const page = await newPage(context);
    await page.goto(server.url('/'), { waitUntil: 'networkidle' });
    // The key field has focus on arrival.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('api-key');
    await page.keyboard.type(key);
    await page.keyboard.press('Enter');
    await page.getByRole('tab', { name: 'Protect' }).waitFor();

    /** Presses Tab until `match` holds for the focused element; fails after 40 presses. */
    const tabTo = async (what: string, match: (el: { id: string; tag: string; text: string; type: string }) => boolean): Promise<void> => {
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab');
        const el = await page.evaluate(() => {
          const a = document.activeElement as HTMLElement | null;
          return { id: a?.id ?? '', tag: a?.tagName ?? '', text: a?.textContent?.trim() ?? '', type: (a as HTMLInputElement | null)?.type ?? '' };
        });
        if (match(el)) {
          // A keyboard focus is always visible.
          const outline = await page.evaluate(() => {
            const a = document.activeElement as HTMLElement;
            const target = a.classList.contains('file-input') ? (a.nextElementSibling as HTMLElement) : a;
            return getComputedStyle(target).outlineStyle;
          });
          expect(outline, `focus ring on ${what}`).not.toBe('none');
          return;
        }
      }
      throw new Error(`Tab never reached ${what}`);
    };

    await tabTo('the tab list', (el) => el.id === 'tab-protect');
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tab-inspect');
    expect(await page.getByRole('tab', { name: 'Inspect' }).getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('ArrowLeft');
    expect(await page.getByRole('tab', { name: 'Protect' }).getAttribute('aria-selected')).toBe('true');

    await tabTo('the file picker', (el) => el.id === 'protect-files');
    // Space on the focused picker opens the chooser. On a busy machine Chromium has let a press go by
    // without one (a CI run waited 30 s in vain while other suites loaded both cores): a keyboard user presses again,
    // and so does the test, at most three times.
    let chooser: FileChooser | undefined;
    for (let i = 0; i < 3 && !chooser; i++) {
      [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 10_000 }).catch(() => undefined), page.keyboard.press('Space')]);
    }
    if (!chooser) throw new Error('Space on the focused file picker never opened a chooser (3 presses)');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('protect-files');
    await chooser.setFiles(good.slice(0, 2));
    await tabTo('the Provenance box', (el) => el.id === 'layer-provenance');
    if (!(await page.getByLabel('Provenance').isChecked())) await page.keyboard.press('Space');
    await tabTo('the Fingerprint box', (el) => el.id === 'layer-fingerprint');
    await page.keyboard.press('Space'); // off: provenance only
    expect(await page.getByLabel('Fingerprint').isChecked()).toBe(false);
    await tabTo('the Protect button', (el) => el.tag === 'BUTTON' && el.text === 'Protect');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('a[download]').length >= 2, undefined, { timeout: 120_000 });
    await tabTo('a download link', (el) => el.tag === 'A' && el.text.startsWith('Download '));
    const dir = join(work, 'keyboard');
    mkdirSync(dir);
    const saved = await download(page, () => page.keyboard.press('Enter'), dir);
    expect(await exiftoolDataMining(et, saved.path)).toBe(PROHIBITED);
    const v = await api(server, 'verify', key, imageForm(readFileSync(saved.path), saved.name));
    expect(v.json).toMatchObject({ provenance: { valid: true }, fingerprint: { present: false } });
    await shot(page, '07-keyboard');
    await context.close();
    expect(consoleErrors).toEqual([]);
  }, 300_000);

  it('fits a 360 px wide screen, signed out and with results', async () => {
    const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await newPage(context);
    await page.goto(server.url('/'), { waitUntil: 'networkidle' });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    await signIn(page);
    await page.locator('input[type=file]').first().setInputFiles(good.slice(0, 2));
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.waitForFunction(() => document.querySelectorAll('a[download]').length >= 2, undefined, { timeout: 120_000 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    for (const tab of ['History', 'Inspect', 'Usage']) {
      await page.getByRole('tab', { name: tab }).click();
      await page.waitForTimeout(300); // the panel's first answer (not a timing assertion)
      expect(await page.evaluate(() => document.documentElement.scrollWidth), tab).toBeLessThanOrEqual(360);
    }
    await page.getByRole('tab', { name: 'Protect' }).click();
    await shot(page, '08-mobile');
    expect(await lowContrast(page)).toEqual([]);
    await context.close();
    expect(consoleErrors).toEqual([]);
  }, 300_000);
  it('an image with Content Credentials: the page says they were kept and shows the warning; the download keeps them valid', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await newPage(context);
    await signIn(page);
    // The corpus file, read where it is.
    await page
      .locator('input[type=file]')
      .first()
      .setInputFiles(join(ROOT, '..', 'shared', 'corpus', 'c2pa_CA.jpg'));
    await page.getByLabel('Provenance').check();
    await page.getByLabel('Fingerprint').check();
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    const row = page.locator('li.file.done');
    await row.waitFor({ timeout: 120_000 });
    await expect.poll(() => row.locator('dt', { hasText: 'Content Credentials' }).count()).toBe(1);
    expect(await row.locator('dd', { hasText: 'Kept: an update manifest signed by this server' }).count()).toBe(1);
    const warnings = await row.getByRole('list', { name: 'Warnings for c2pa_CA.jpg' }).locator('li').allTextContents();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('Content Credentials were kept');
    // The before/after panel has a row for them: valid before, valid after with the training use written.
    const c2paRow = row.locator('table.before-after tr', { has: page.locator('th', { hasText: 'Content Credentials' }) });
    expect(await c2paRow.locator('td').allTextContents()).toEqual(['Valid', 'Valid, AI training: notAllowed']);
    const saved = await download(page, () => row.getByRole('link', { name: /^Download / }).click(), work);
    const v = await api(server, 'verify', key, imageForm(readFileSync(saved.path), saved.name));
    expect(v.json).toMatchObject({ optedOut: true, c2pa: { present: true, valid: true, trainingMining: 'notAllowed' }, provenance: { valid: true } });
    await shot(page, '09-content-credentials');
    await context.close();
    expect(consoleErrors).toEqual([]);
  }, 300_000);

  it('the TDMRep and Content Credentials boxes: the file gets both, the reference reader validates it, the record names them', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await newPage(context);
    await signIn(page);
    const file = good.find((p) => p.endsWith('.png')) ?? good[0]!;
    const name = file.split('/').pop()!;
    await page.locator('input[type=file]').first().setInputFiles(file);
    // Off until ticked; provenance stays on (its default), the fingerprint off.
    expect(await page.getByLabel('TDMRep').isChecked()).toBe(false);
    expect(await page.getByLabel('Content Credentials').isChecked()).toBe(false);
    await page.getByLabel('TDMRep').check();
    await page.getByLabel('Content Credentials').check();
    await page.getByLabel('Fingerprint').uncheck();
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    const row = page.locator('li.file.done');
    await row.waitFor({ timeout: 120_000 });
    const panel = (what: string) =>
      row
        .locator('table.before-after tr', { has: page.locator('th', { hasText: what }) })
        .locator('td')
        .allTextContents();
    expect(await panel('TDMRep')).toEqual(['None', 'Reserved']);
    expect(await panel('Content Credentials')).toEqual(['None', 'Valid, AI training: notAllowed']);
    const saved = await download(page, () => row.getByRole('link', { name: /^Download / }).click(), work);
    const bytes = readFileSync(saved.path);
    expect(await exiftoolDataMining(et, saved.path)).toBe(PROHIBITED);
    const v = await api(server, 'verify', key, imageForm(bytes, saved.name));
    expect(v.json).toMatchObject({
      optedOut: true,
      otherSignals: ['c2pa.trainingMining', 'tdmrep.reservation'],
      c2pa: { present: true, valid: true, trainingMining: 'notAllowed' },
      provenance: { valid: true },
    });
    const format = (await sharp(bytes).metadata()).format as 'jpeg' | 'png' | 'webp';
    const report = await read(format, bytes);
    expect(report.validation_state).toBe('Valid');
    expect(report.manifests[report.active_manifest]!.assertions.find((a) => a.label === 'cawg.training-mining')?.data.entries).toMatchObject({
      'cawg.ai_training': { use: 'notAllowed' },
      'cawg.ai_generative_training': { use: 'notAllowed' },
    });
    // The dashboard's record of it names the layers in the order they were applied.
    const records = await page.evaluate(
      async (k) => (await (await fetch('/api/v1/dashboard/records', { headers: { Authorization: `Bearer ${k}` } })).json()).records,
      key,
    );
    const record = records.find((r: { sha256: string }) => r.sha256 === sha256(bytes));
    expect(record).toMatchObject({ originalName: name, layers: ['tdmrep', 'provenance', 'content-credentials'] });
    await shot(page, '10-signals');
    await context.close();
    expect(consoleErrors).toEqual([]);
  }, 300_000);
});
