// The dashboard's Vault tab and Settings in Debian's Chromium against the real server: the vault turned
// on in Settings, a batch marked with "Keep originals in my vault", the usage bar and the list with its
// thumbnails, a search, the original and the marked file downloaded and checked byte for byte, a delete
// confirmed and the usage going down, the 360 px layout, contrast and the keyboard.
// Screenshots go to test-artifacts/dashboard-vault/ (gitignored).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../helpers/assert.js';
import { download, launch, lowContrast, newPage, pageWidth, shots, signIn } from '../helpers/browser.js';
import { ROOT, TestServer, api, imageForm } from '../helpers/server.js';

const NATURAL = join(ROOT, '..', 'shared', 'natural');
const shot = shots('dashboard-vault');

let server: TestServer;
let key: string;
let browser: Browser;
let work: string;
const errors: string[] = [];
/** The three originals the batch sends: path, name, bytes. */
const originals: Array<{ path: string; name: string; bytes: Buffer }> = [];

interface VaultInfo {
  enabled: boolean;
  usedBytes: number;
  limitBytes: number;
  objects: number;
}

/** The vault's state as the API gives it to the page's key (fetched from the page, same origin). */
function vaultOf(page: Page): Promise<VaultInfo> {
  return page.evaluate(async (k) => (await (await fetch('/api/v1/vault', { headers: { Authorization: `Bearer ${k}` } })).json()) as VaultInfo, key);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'optmark-vault-ui-'));
  server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2' } });
  ({ key } = await server.account());
  const specs: Array<[number, 'jpeg' | 'png' | 'webp', string]> = [
    [7, 'jpeg', 'harbour.jpg'],
    [8, 'png', 'houses.png'],
    [9, 'webp', 'sails.webp'],
  ];
  for (const [n, format, name] of specs) {
    const path = join(work, name);
    await sharp(join(NATURAL, `kodim0${n}.png`))
      .resize({ width: 480 })
      .toFormat(format)
      .toFile(path);
    originals.push({ path, name, bytes: readFileSync(path) });
  }
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.dispose();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the Vault tab and Settings in Chromium', () => {
  it('turns the vault on, keeps a batch, lists it with thumbnails, searches, downloads exact bytes and deletes with confirmation', async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    const page = await newPage(context, errors);
    await signIn(page, server, key);

    // Off by default: no "Keep originals" box on Protect, and the Settings box unticked.
    expect(await page.getByLabel('Keep originals in my vault').count()).toBe(0);
    await page.getByRole('tab', { name: 'Settings' }).click();
    const toggle = page.getByLabel('Keep originals in a Private Vault');
    expect(await toggle.isChecked()).toBe(false);
    expect((await vaultOf(page)).enabled).toBe(false);
    await toggle.check();
    await page.getByText(/^The vault is on/).waitFor();
    expect(await vaultOf(page)).toMatchObject({ enabled: true, usedBytes: 0, objects: 0, limitBytes: 10_000_000_000 });
    await shot(page, '01-settings-on');

    // A batch of three with the box ticked (it is, once the vault is on).
    await page.getByRole('tab', { name: 'Protect' }).click();
    const keep = page.getByLabel('Keep originals in my vault');
    expect(await keep.isChecked()).toBe(true);
    await page.locator('#protect-files').setInputFiles(originals.map((o) => o.path));
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.waitForFunction(() => document.querySelectorAll('a[download]').length >= 3, undefined, { timeout: 120_000 });
    const marked = new Map<string, string>(); // original name -> the marked file's SHA-256 shown by Protect
    for (const li of await page.locator('li.file.done').all()) {
      marked.set((await li.locator('.name').first().textContent())!, (await li.locator('code.hash').textContent())!);
    }
    expect([...marked.keys()].sort()).toEqual(originals.map((o) => o.name).sort());

    // The vault holds each original and its marked file: the bar and the API agree on the bytes.
    await page.getByRole('tab', { name: 'Vault' }).click();
    const info = await vaultOf(page);
    expect(info.objects).toBe(6);
    const originalBytes = originals.reduce((n, o) => n + o.bytes.length, 0);
    expect(info.usedBytes).toBeGreaterThan(originalBytes);
    const bar = page.locator('#panel-vault progress');
    await expect.poll(async () => Number(await bar.getAttribute('value'))).toBe(info.usedBytes);
    expect(Number(await bar.getAttribute('max'))).toBe(info.limitBytes);
    await page.getByText(/of 10\.0 GB used \(6 files\)/).waitFor();

    // The list: one entry per image, each with a thumbnail drawn from a blob: URL (the key never in a URL).
    const entries = page.locator('li.vault-entry');
    await expect.poll(() => entries.count()).toBe(3);
    await expect.poll(() => page.locator('li.vault-entry img.thumb').count(), { timeout: 30_000 }).toBe(3);
    for (const img of await page.locator('li.vault-entry img.thumb').all()) {
      expect(await img.getAttribute('src')).toMatch(/^blob:/);
      await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBeGreaterThan(0);
    }
    await shot(page, '02-vault-list');

    // Search by name: one entry.
    const search = page.getByLabel('Search by file name, SHA-256 or record');
    await search.fill('houses');
    await search.press('Enter');
    await page.getByText(/^2 files matching "houses"\./).waitFor();
    await expect.poll(() => entries.count()).toBe(1);
    expect(await entries.first().locator('.name').textContent()).toBe('houses.png');
    await shot(page, '03-search');

    // Downloads: the original is the uploaded file, byte for byte; the marked file is the one Protect made.
    const dir = join(work, 'downloads');
    const houses = originals.find((o) => o.name === 'houses.png')!;
    const original = await download(
      page,
      () =>
        entries
          .first()
          .getByRole('button', { name: /^Download original/ })
          .click(),
      dir,
    );
    expect(sha256(readFileSync(original.path))).toBe(sha256(houses.bytes));
    expect(original.name).toBe('houses.png');
    const markedFile = await download(
      page,
      () =>
        entries
          .first()
          .getByRole('button', { name: /^Download marked file/ })
          .click(),
      join(dir, 'marked'),
    );
    const markedBytes = readFileSync(markedFile.path);
    expect(sha256(markedBytes)).toBe(marked.get('houses.png'));
    const v = await api(server, 'verify', key, imageForm(markedBytes, markedFile.name, 'image/png'));
    expect(v.json).toMatchObject({ optedOut: true });

    // Delete, with a confirmation that can be declined.
    await entries
      .first()
      .getByRole('button', { name: /^Delete/ })
      .click();
    const confirm = entries.first().locator('fieldset.confirm');
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain('houses.png and its marked file');
    // Focus goes to the confirming button.
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Yes, delete');
    await shot(page, '04-confirm-delete');
    await confirm.getByRole('button', { name: 'Keep' }).click();
    expect(await confirm.count()).toBe(0);
    expect((await vaultOf(page)).objects).toBe(6);
    await entries
      .first()
      .getByRole('button', { name: /^Delete/ })
      .click();
    await entries.first().getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByText(/^Deleted houses\.png and its marked file\./).waitFor();
    const after = await vaultOf(page);
    expect(after.objects).toBe(4);
    expect(after.usedBytes).toBe(info.usedBytes - houses.bytes.length - markedBytes.length);
    await expect.poll(async () => Number(await bar.getAttribute('value'))).toBe(after.usedBytes);
    await search.fill('');
    await search.press('Enter');
    await expect.poll(() => entries.count()).toBe(2);
    await shot(page, '05-after-delete');
    expect(await lowContrast(page)).toEqual([]);

    // Off again in Settings: the stored files stay, and Protect no longer offers the box.
    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.getByLabel('Keep originals in a Private Vault').uncheck();
    await page.getByText(/^The vault is off/).waitFor();
    expect(await vaultOf(page)).toMatchObject({ enabled: false, objects: 4, usedBytes: after.usedBytes });
    await page.getByRole('tab', { name: 'Protect' }).click();
    expect(await page.getByLabel('Keep originals in my vault').count()).toBe(0);
    await page.getByRole('tab', { name: 'Vault' }).click();
    await page.getByText(/^The vault is off: new images are not kept/).waitFor();
    await context.close();
    expect(errors).toEqual([]);
  }, 300_000);

  it('fits a 360 px screen and works from the keyboard: delete confirmed with Enter', async () => {
    const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
    const page = await newPage(context, errors);
    await signIn(page, server, key);
    await page.getByRole('tab', { name: 'Vault' }).click();
    const entries = page.locator('li.vault-entry');
    await expect.poll(() => entries.count()).toBe(2);
    await expect.poll(() => page.locator('li.vault-entry img.thumb').count(), { timeout: 30_000 }).toBe(2);
    expect(await pageWidth(page)).toBeLessThanOrEqual(360);
    await shot(page, '06-mobile');
    expect(await lowContrast(page)).toEqual([]);
    const before = await vaultOf(page);
    // Tab to the first Delete button, Enter, then Enter on the focused confirmation.
    await page.locator('#vault-q').focus();
    let reached = false;
    for (let i = 0; i < 30 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = (await page.evaluate(() => document.activeElement?.textContent ?? '')).startsWith('Delete');
    }
    expect(reached).toBe(true);
    expect(await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle)).not.toBe('none');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Yes, delete');
    await page.keyboard.press('Enter');
    await expect.poll(() => entries.count()).toBe(1);
    const after = await vaultOf(page);
    expect(after.objects).toBe(before.objects - 2);
    expect(after.usedBytes).toBeLessThan(before.usedBytes);
    expect(await pageWidth(page)).toBeLessThanOrEqual(360);
    await context.close();
    expect(errors).toEqual([]);
  }, 300_000);
});
