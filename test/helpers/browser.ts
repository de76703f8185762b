// Debian's Chromium driven by playwright-core (never a downloaded browser) for the dashboard's tests:
// launch, a page that records console errors, sign-in, screenshots, downloads, the width and contrast checks.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Download, type Page } from 'playwright-core';
import { ROOT, type TestServer } from './server.js';

const CHROMIUM = process.env.OPTMARK_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (npm test does, as root)`);
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

/** The folder of a test's screenshots, under test-artifacts/ (gitignored). */
export function shots(name: string): (page: Page, shot: string) => Promise<void> {
  const dir = join(ROOT, 'test-artifacts', name);
  mkdirSync(dir, { recursive: true });
  return async (page, shot) => {
    await page.screenshot({ path: join(dir, `${shot}.png`), fullPage: true });
  };
}

/** A page whose console errors and uncaught exceptions land in `errors` (any is a failure). */
export async function newPage(context: BrowserContext, errors: string[]): Promise<Page> {
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  return page;
}

export async function signIn(page: Page, server: TestServer, key: string): Promise<void> {
  await page.goto(server.url('/'), { waitUntil: 'networkidle' });
  const field = page.getByLabel('API key');
  await field.fill(key);
  await field.press('Enter');
  await page.getByRole('tab', { name: 'Protect' }).waitFor();
}

/**
 * Runs `trigger` and saves the download it starts into `dir`. Chromium now and then lets a click on a
 * download control go by without a download (seen under load; test/long/dashboard-browser.test.ts): the
 * test clicks again, at most three times.
 */
export async function download(page: Page, trigger: () => Promise<void>, dir: string): Promise<{ path: string; name: string }> {
  let d: Download | undefined;
  for (let attempt = 1; d === undefined; attempt++) {
    const started = page.waitForEvent('download', { timeout: 15_000 });
    await trigger();
    try {
      d = await started;
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
  mkdirSync(dir, { recursive: true });
  const path = join(dir, d.suggestedFilename());
  await d.saveAs(path);
  return { path, name: d.suggestedFilename() };
}

/** The document's width in CSS pixels (more than the viewport's means a sideways scroll). */
export function pageWidth(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth);
}

/** Texts whose colour against their effective background is below 4.5:1 (WCAG 2 relative luminance). */
export function lowContrast(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const parse = (c: string): number[] => (c.match(/[\d.]+/g) ?? []).map(Number);
    const lum = ([r, g, b]: number[]): number => {
      const f = (v: number) => {
        const s = v / 255;
        return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * f(r!) + 0.7152 * f(g!) + 0.0722 * f(b!);
    };
    const background = (el: Element | null): number[] => {
      for (let e = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3]! > 0)) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const bad: string[] = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || !n.textContent?.trim() || el.closest('[hidden], .sr-only, .skip, noscript')) continue;
      const style = getComputedStyle(el);
      if (style.visibility === 'hidden' || style.display === 'none' || el.getClientRects().length === 0) continue;
      const fg = lum(parse(style.color));
      const bg = lum(background(el));
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      if (ratio < 4.5) bad.push(`${n.textContent.trim().slice(0, 40)}: ${ratio.toFixed(2)}`);
    }
    return bad;
  });
}
