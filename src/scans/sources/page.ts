/**
 * A web page as a scan source (docs/scans.md, "Sources"): the images of `img` (`src`, every `srcset`
 * candidate), `picture > source` (`srcset`), `<meta property="og:image">` and `<meta name="twitter:image">`,
 * resolved against the page (and its `<base href>`), each image once, in the order met. With
 * `followLinks`, same-origin `<a href>` pages are visited breadth first up to limits.maxPages pages and
 * limits.maxDepth links from the first. A page's `<meta name="robots" content="noai, noimageai">` and
 * `<meta name="tdm-reservation" content="1">` are served signals of the images found on it.
 */
import { Parser } from 'htmlparser2';
import { ScanError, type Candidate, type Loaded, type OpenedSource, type ScanContext } from '../types.js';

interface PageImage {
  url: string;
  /** The meta signals of the page it was first found on. */
  meta: string[];
}

interface ParsedPage {
  images: string[];
  links: string[];
  meta: string[];
}

/** The `srcset` candidates' URLs (`a.jpg 1x, b.jpg 2x`; URLs may hold commas only when followed by a descriptor-free end). */
export function srcsetUrls(srcset: string): string[] {
  return srcset
    .split(/,\s+/)
    .map((c) => c.trim().split(/\s+/)[0] ?? '')
    .filter((u) => u !== '');
}

/** What one page's HTML names (URLs as written, resolved later against `base`). */
export function parsePage(html: string, pageUrl: string): ParsedPage {
  let base = pageUrl;
  const images: string[] = [];
  const links: string[] = [];
  const meta = new Set<string>();
  let inPicture = 0;
  const resolve = (u: string | undefined): string | undefined => {
    if (!u) return undefined;
    try {
      const r = new URL(u.trim(), base);
      r.hash = '';
      return r.protocol === 'http:' || r.protocol === 'https:' ? r.href : undefined;
    } catch {
      return undefined;
    }
  };
  const add = (list: string[], u: string | undefined) => {
    const r = resolve(u);
    if (r) list.push(r);
  };
  const parser = new Parser(
    {
      onopentag(name, a) {
        switch (name) {
          case 'base':
            if (a.href) base = resolve(a.href) ?? base;
            break;
          case 'picture':
            inPicture++;
            break;
          case 'img':
            add(images, a.src);
            for (const u of srcsetUrls(a.srcset ?? '')) add(images, u);
            break;
          case 'source':
            if (inPicture > 0) for (const u of srcsetUrls(a.srcset ?? '')) add(images, u);
            break;
          case 'meta': {
            const key = (a.property ?? a.name ?? '').toLowerCase();
            if (key === 'og:image' || key === 'og:image:url' || key === 'twitter:image') add(images, a.content);
            const content = (a.content ?? '').toLowerCase();
            if (key === 'robots') {
              const d = new Set(content.split(/[\s,]+/));
              if (d.has('noai')) meta.add('meta:noai');
              if (d.has('noimageai')) meta.add('meta:noimageai');
            }
            if (key === 'tdm-reservation' && content.trim() === '1') meta.add('meta:tdm-reservation');
            break;
          }
          case 'a':
            add(links, a.href);
            break;
        }
      },
      onclosetag(name) {
        if (name === 'picture' && inPicture > 0) inPicture--;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return { images, links, meta: [...meta] };
}

export function pageSource(url: string, ctx: ScanContext): OpenedSource {
  const start = new URL(url);
  return {
    kind: 'page',
    async *candidates(from: number): AsyncGenerator<Candidate> {
      const seenPages = new Set<string>([start.href]);
      const seenImages = new Set<string>();
      const queue: { url: string; depth: number }[] = [{ url: start.href, depth: 0 }];
      let pages = 0;
      let index = 0;
      while (queue.length > 0 && pages < Math.max(1, ctx.limits.maxPages)) {
        const page = queue.shift()!;
        pages++;
        let parsed: ParsedPage;
        try {
          const r = await ctx.fetcher.get(page.url, { maxBytes: ctx.limits.maxHtmlBytes });
          if (r.status < 200 || r.status > 299) throw new ScanError('http_status', `${page.url} answered ${r.status}`);
          parsed = parsePage(Buffer.from(r.body).toString('utf8'), r.url);
        } catch (err) {
          // The first page is the source: its failure is the scan's. A linked page is passed over.
          if (page.depth === 0) throw err;
          const e = err instanceof ScanError ? err : new ScanError('fetch_failed', (err as Error).message);
          ctx.skipped(page.url, e.code, e.message);
          continue;
        }
        for (const image of parsed.images) {
          if (seenImages.has(image)) continue;
          seenImages.add(image);
          const i = index++;
          if (i < from) continue;
          yield candidateOf(i, { url: image, meta: parsed.meta }, ctx);
        }
        if (ctx.followLinks && page.depth < ctx.limits.maxDepth) {
          for (const link of parsed.links) {
            const l = new URL(link);
            if (l.origin !== start.origin || seenPages.has(l.href)) continue;
            seenPages.add(l.href);
            queue.push({ url: l.href, depth: page.depth + 1 });
          }
        }
      }
    },
    async close() {},
  };
}

/** An image URL as a candidate: fetched within the per-image limit, with what its origin and page serve. */
export function candidateOf(index: number, image: PageImage, ctx: ScanContext): Candidate {
  return {
    index,
    location: image.url,
    async load(): Promise<Loaded> {
      const r = await ctx.fetcher.get(image.url, { maxBytes: ctx.limits.maxImageBytes });
      if (r.status < 200 || r.status > 299) throw new ScanError('http_status', `${image.url} answered ${r.status}`);
      const served = await ctx.fetcher.servedSignals(r.url, r.headers);
      return { bytes: r.body, servedSignals: [...new Set([...served, ...image.meta])] };
    },
  };
}
