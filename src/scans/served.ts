/**
 * The opt-out signals a crawler meets beside an image (docs/scans.md, "Served signals"), as stable
 * strings. From the image's response headers:
 *
 *   x-robots-tag:noai, x-robots-tag:noimageai   X-Robots-Tag directives (DeviantArt's; any agent prefix)
 *   tdm-reservation, tdm-policy                  TDMRep headers (W3C TDMRep final report, section 3.2)
 *   content-usage:train-ai=n                     AIPREF's Content-Usage header (draft-ietf-aipref-attach)
 *
 * From the image's origin, each file read once per scan:
 *
 *   robots.txt                 a known AI crawler (src/signals/site.ts, AI_CRAWLERS) may not fetch the path
 *   robots.txt:content-usage   a robots.txt Content-Usage rule with train-ai=n covers the path
 *   ai.txt                     Spawning's ai.txt disallows the path
 *   tdmrep.json                /.well-known/tdmrep.json's first rule matching the path reserves TDM rights
 *
 * The page an image was found on adds `meta:noai`, `meta:noimageai`, `meta:tdm-reservation` (./sources/page.ts).
 * These are the files and headers `optmark site-signals` writes (a test serves them and reads them back).
 */
import { AI_CRAWLERS } from '../signals/site.js';
import { parseRobots } from './net/robots.js';

/** X-Robots-Tag, tdm-* and Content-Usage headers of a response, as signals. */
export function headerSignals(headers: Record<string, string>): string[] {
  const out: string[] = [];
  const tag = headers['x-robots-tag'];
  if (tag) {
    // "noai, noimageai" or "bot: noai"; several headers arrive joined with commas.
    const directives = new Set(
      tag
        .toLowerCase()
        .split(/[,\n]/)
        .map((d) => d.split(':').pop()!.trim()),
    );
    if (directives.has('noai')) out.push('x-robots-tag:noai');
    if (directives.has('noimageai')) out.push('x-robots-tag:noimageai');
  }
  if ((headers['tdm-reservation'] ?? '').trim() === '1') out.push('tdm-reservation');
  if ((headers['tdm-policy'] ?? '').trim() !== '') out.push('tdm-policy');
  if (/(^|[\s,;])train-ai\s*=\s*n\b/i.test(headers['content-usage'] ?? '')) out.push('content-usage:train-ai=n');
  return out;
}

/** RFC 9309 path matching (`*` any run, `$` the end), as robots.txt, ai.txt and tdmrep.json patterns use it. */
export function pathMatches(pattern: string, path: string): boolean {
  const anchored = pattern.endsWith('$');
  const body = (anchored ? pattern.slice(0, -1) : pattern).split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  const re = new RegExp(`^${body.join('.*')}${anchored ? '$' : ''}`);
  return re.test(path);
}

/** robots.txt `Content-Usage:` rules (optionally `Content-Usage: /path train-ai=n`): does one with train-ai=n cover `path`? */
export function robotsContentUsage(text: string, path: string): boolean {
  for (const line of text.split(/\r?\n/)) {
    const m = /^\s*content-usage\s*:\s*(.*)$/i.exec(line.replace(/#.*$/, ''));
    if (!m) continue;
    const parts = m[1]!.trim().split(/\s+/);
    const scope = parts[0]?.startsWith('/') ? parts.shift()! : '/';
    if (pathMatches(scope, path) && parts.some((p) => /(^|,)train-ai\s*=\s*n(,|$)/i.test(p))) return true;
  }
  return false;
}

/** The first TDMRep rule of a tdmrep.json whose location matches `path` reserves rights. */
export function tdmrepReserves(json: string, path: string): boolean {
  let rules: unknown;
  try {
    rules = JSON.parse(json);
  } catch {
    return false;
  }
  if (!Array.isArray(rules)) return false;
  for (const rule of rules) {
    if (typeof rule !== 'object' || rule === null) continue;
    const location = (rule as { location?: unknown }).location;
    if (typeof location !== 'string' || !pathMatches(location, path)) continue;
    return Number((rule as Record<string, unknown>)['tdm-reservation']) === 1;
  }
  return false;
}

interface OriginFiles {
  robots: string | undefined;
  aiTxt: string | undefined;
  tdmrep: string | undefined;
}

/** The origin-level signals of a scan, each origin's files read once (`read` answers undefined for none). */
export class OriginSignals {
  readonly #read: (url: URL) => Promise<string | undefined>;
  readonly #files = new Map<string, Promise<OriginFiles>>();

  constructor(read: (url: URL) => Promise<string | undefined>) {
    this.#read = read;
  }

  #filesOf(url: URL): Promise<OriginFiles> {
    let f = this.#files.get(url.origin);
    if (!f) {
      f = (async () => {
        const [robots, aiTxt, tdmrep] = await Promise.all(['/robots.txt', '/ai.txt', '/.well-known/tdmrep.json'].map((p) => this.#read(new URL(p, url))));
        return { robots, aiTxt, tdmrep };
      })();
      this.#files.set(url.origin, f);
    }
    return f;
  }

  async signals(url: URL, headers: Record<string, string>): Promise<string[]> {
    const out = headerSignals(headers);
    const files = await this.#filesOf(url);
    const path = url.pathname + url.search;
    if (files.robots !== undefined) {
      const robots = parseRobots(new URL('/robots.txt', url).href, files.robots);
      if (AI_CRAWLERS.some(({ agent }) => robots.isDisallowed(url.href, agent) === true)) out.push('robots.txt');
      if (robotsContentUsage(files.robots, path)) out.push('robots.txt:content-usage');
    }
    if (files.aiTxt !== undefined) {
      const ai = parseRobots(new URL('/ai.txt', url).href, files.aiTxt);
      if (ai.isDisallowed(url.href, '*') === true || aiTxtDisallowsPattern(files.aiTxt, path)) out.push('ai.txt');
    }
    if (files.tdmrep !== undefined && tdmrepReserves(files.tdmrep, path)) out.push('tdmrep.json');
    return out;
  }
}

/** Spawning's ai.txt also writes file-type rules without a leading slash (`Disallow: *.jpg`). */
function aiTxtDisallowsPattern(text: string, path: string): boolean {
  return text.split(/\r?\n/).some((line) => {
    const m = /^\s*disallow\s*:\s*(\S+)/i.exec(line);
    return m !== null && !m[1]!.startsWith('/') && pathMatches(m[1]!.startsWith('*') ? m[1]! : `*${m[1]}`, path);
  });
}
