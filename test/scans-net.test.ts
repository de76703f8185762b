/**
 * The scans' HTTP client and its sources against real servers on loopback (issue #38 points 1, 2, 5):
 * the address rules on the connected socket and on every redirect (no byte reaches a refused target),
 * time and byte limits, bounded decompression, robots.txt, the served signals (read back from the files
 * and headers `optmark site-signals` writes), the page's image forms and the manifest formats.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { parquetWriteBuffer } from 'hyparquet-writer';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aiTxt, robotsTxt, signalHeaders, tdmrepJson } from '../src/signals/site.js';
import { DEFAULT_SCAN_LIMITS, lowered } from '../src/scans/limits.js';
import { AddressPolicy } from '../src/scans/net/address.js';
import { AGENT_TOKEN, createFetcher, USER_AGENT } from '../src/scans/net/fetcher.js';
import { manifestSource } from '../src/scans/sources/manifest.js';
import { pageSource } from '../src/scans/sources/page.js';
import type { Candidate, ScanContext, ScanLimits } from '../src/scans/types.js';
import { ScanSite } from './helpers/scan-site.js';

const LOOPBACK = ['127.0.0.0/8'];
let site: ScanSite;
let other: ScanSite;
let png: Buffer;
const folder = mkdtempSync(join(tmpdir(), 'optmark-scan-net-'));

function context(allow: string[] = LOOPBACK, limits: Partial<ScanLimits> = {}, followLinks = false) {
  const skipped: { location: string; code: string }[] = [];
  const l = lowered(DEFAULT_SCAN_LIMITS, { connectTimeoutMs: 2000, headersTimeoutMs: 2000, bodyTimeoutMs: 1500, ...limits });
  const ac = new AbortController();
  const ctx: ScanContext = {
    fetcher: createFetcher({ limits: l, policy: new AddressPolicy(allow), signal: ac.signal, skipped: (location, code) => skipped.push({ location, code }) }),
    limits: l,
    folder,
    allowLocal: false,
    followLinks,
    signal: ac.signal,
    skipped: (location, code) => skipped.push({ location, code }),
  };
  return { ctx, skipped };
}

async function all(it: AsyncIterable<Candidate>): Promise<Candidate[]> {
  const out: Candidate[] = [];
  for await (const c of it) out.push(c);
  return out;
}

beforeAll(async () => {
  site = await ScanSite.start('127.0.0.1');
  other = await ScanSite.start('127.0.0.2');
  png = await sharp({ create: { width: 16, height: 16, channels: 3, background: '#336699' } })
    .png()
    .toBuffer();
  for (const p of ['/a.png', '/b.png', '/c.png', '/d.png', '/e.png', '/f.png']) site.file(p, png, { 'Content-Type': 'image/png' });
  other.file('/secret.png', png);
});
afterAll(async () => {
  await site.close();
  await other.close();
  rmSync(folder, { recursive: true, force: true });
});

describe('the address rules', () => {
  it('refuses loopback by default without sending a byte, and admits it when allowed', async () => {
    const before = site.requests.length;
    await expect(context([]).ctx.fetcher.get(site.url('/a.png'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'target_not_allowed' });
    await expect(context([]).ctx.fetcher.get(`http://localhost:${site.port}/a.png`, { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'target_not_allowed' });
    expect(site.requests.length).toBe(before);
    const r = await context().ctx.fetcher.get(site.url('/a.png'), { maxBytes: 1e6 });
    expect(r.status).toBe(200);
    expect(Buffer.from(r.body).equals(png)).toBe(true);
  });

  it('checks every redirect: an allowed host sending the crawler to a refused one gets no request there', async () => {
    site.routes.set('/to-other', (_q, res) => {
      res.statusCode = 302;
      res.setHeader('Location', other.url('/secret.png'));
      res.end();
    });
    site.routes.set('/to-metadata', (_q, res) => {
      res.statusCode = 301;
      res.setHeader('Location', 'http://169.254.169.254/latest/meta-data/');
      res.end();
    });
    site.routes.set('/to-file', (_q, res) => {
      res.statusCode = 302;
      res.setHeader('Location', 'file:///etc/passwd');
      res.end();
    });
    const { ctx } = context(['127.0.0.1/32']);
    await expect(ctx.fetcher.get(site.url('/to-other'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'target_not_allowed' });
    await expect(ctx.fetcher.get(site.url('/to-metadata'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'target_not_allowed' });
    await expect(ctx.fetcher.get(site.url('/to-file'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'target_not_allowed' });
    expect(other.requests).toEqual([]);
    // The same redirect with both allowed is followed.
    expect((await context().ctx.fetcher.get(site.url('/to-other'), { maxBytes: 1e6 })).status).toBe(200);
  });

  it('refuses metadata, IPv4-mapped loopback and unique-local addresses', () => {
    const p = new AddressPolicy([]);
    for (const ip of ['169.254.169.254', '::ffff:127.0.0.1', '::ffff:7f00:1', 'fd00:ec2::254', '10.1.2.3', '192.168.1.1', '100.64.0.1', '224.0.0.1', '::1'])
      expect(p.allows(ip), ip).toBe(false);
    for (const ip of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']) expect(p.allows(ip), ip).toBe(true);
  });

  it('a redirect loop stops at the limit', async () => {
    site.routes.set('/loop', (_q, res) => {
      res.statusCode = 302;
      res.setHeader('Location', '/loop');
      res.end();
    });
    await expect(context(LOOPBACK, { maxRedirects: 3 }).ctx.fetcher.get(site.url('/loop'), { maxBytes: 1e6 })).rejects.toMatchObject({
      code: 'too_many_redirects',
    });
  });
});

describe('limits', () => {
  it('a body that never ends fails timeout; headers that never come fail timeout', async () => {
    site.routes.set('/forever', (_q, res) => {
      res.writeHead(200, { 'Content-Type': 'image/png' });
      const t = setInterval(() => res.write('x'), 50);
      res.on('close', () => clearInterval(t));
    });
    site.routes.set('/silent', () => {});
    const { ctx } = context();
    await expect(ctx.fetcher.get(site.url('/forever'), { maxBytes: 1e9 })).rejects.toMatchObject({ code: 'timeout' });
    await expect(ctx.fetcher.get(site.url('/silent'), { maxBytes: 1e9 })).rejects.toMatchObject({ code: 'timeout' });
  });

  it('a gzip bomb stops at the response limit; the scan budget counts the wire bytes', async () => {
    const bomb = gzipSync(Buffer.alloc(200 * 1024 * 1024));
    site.file('/bomb', bomb, { 'Content-Encoding': 'gzip' });
    const { ctx } = context();
    await expect(ctx.fetcher.get(site.url('/bomb'), { maxBytes: 1024 * 1024 })).rejects.toMatchObject({ code: 'too_large' });
    const small = context(LOOPBACK, { maxBytes: 100 });
    await expect(small.ctx.fetcher.get(site.url('/a.png'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'budget_exceeded' });
  });

  it('obeys robots.txt for its own agent and says what it skipped', async () => {
    const s = await ScanSite.start('127.0.0.3');
    try {
      s.file('/robots.txt', `User-agent: ${AGENT_TOKEN}\nDisallow: /private/\n`);
      s.file('/private/x.png', png);
      s.file('/public/x.png', png);
      let agent = '';
      s.routes.set('/ua', (req, res) => {
        agent = req.headers['user-agent'] ?? '';
        res.end('ok');
      });
      const { ctx, skipped } = context();
      await expect(ctx.fetcher.get(s.url('/private/x.png'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'robots_disallowed' });
      expect(skipped).toEqual([{ location: s.url('/private/x.png'), code: 'robots_disallowed' }]);
      expect(s.requests).not.toContain('/private/x.png');
      expect((await ctx.fetcher.get(s.url('/public/x.png'), { maxBytes: 1e6 })).status).toBe(200);
      await ctx.fetcher.get(s.url('/ua'), { maxBytes: 1e6 });
      expect(agent).toBe(USER_AGENT);
      expect(s.requests.filter((r) => r === '/robots.txt')).toHaveLength(1);
    } finally {
      await s.close();
    }
  });
});

describe('served signals', () => {
  it('reads back what optmark site-signals writes: robots.txt, its Content-Usage rule, ai.txt, tdmrep.json and the headers', async () => {
    const s = await ScanSite.start('127.0.0.4');
    try {
      const policy = 'https://example.com/policy';
      s.file('/robots.txt', robotsTxt(policy));
      s.file('/ai.txt', aiTxt(policy));
      s.file('/.well-known/tdmrep.json', tdmrepJson(policy), { 'Content-Type': 'application/json' });
      s.file('/img.png', png, Object.fromEntries(signalHeaders(policy)));
      s.file('/bare.png', png);
      const { ctx } = context();
      const r = await ctx.fetcher.get(s.url('/img.png'), { maxBytes: 1e6 });
      expect((await ctx.fetcher.servedSignals(r.url, r.headers)).sort()).toEqual(
        [
          'ai.txt',
          'content-usage:train-ai=n',
          'robots.txt',
          'robots.txt:content-usage',
          'tdm-policy',
          'tdm-reservation',
          'tdmrep.json',
          'x-robots-tag:noai',
          'x-robots-tag:noimageai',
        ].sort(),
      );
      const bare = await ctx.fetcher.get(s.url('/bare.png'), { maxBytes: 1e6 });
      expect((await ctx.fetcher.servedSignals(bare.url, bare.headers)).sort()).toEqual(['ai.txt', 'robots.txt', 'robots.txt:content-usage', 'tdmrep.json']);
      // A site without any of them serves nothing.
      const plain = await ctx.fetcher.get(site.url('/a.png'), { maxBytes: 1e6 });
      expect(await ctx.fetcher.servedSignals(plain.url, plain.headers)).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

describe('a page as a source', () => {
  it('finds img src and srcset, picture sources, og:image and twitter:image, once each, with the page meta signals', async () => {
    site.file(
      '/page.html',
      `<!doctype html><html><head><base href="/"><meta name="robots" content="noai, noimageai"><meta name="tdm-reservation" content="1">
       <meta property="og:image" content="/a.png"><meta name="twitter:image" content="${site.url('/b.png')}"></head>
       <body><img src="a.png"><img srcset="c.png 1x, d.png 2x"><picture><source srcset="e.png 640w"><img src="f.png"></picture>
       <a href="/page2.html">next</a></body></html>`,
      { 'Content-Type': 'text/html' },
    );
    site.file('/page2.html', '<img src="/g.png">', { 'Content-Type': 'text/html' });
    const { ctx } = context();
    const found = await all(pageSource(site.url('/page.html'), ctx).candidates(0));
    expect(found.map((c) => c.location)).toEqual(['a', 'b', 'c', 'd', 'e', 'f'].map((x) => site.url(`/${x}.png`)));
    expect(found.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
    const loaded = await found[0]!.load();
    expect(Buffer.from(loaded.bytes).equals(png)).toBe(true);
    expect(loaded.servedSignals.sort()).toEqual(['meta:noai', 'meta:noimageai', 'meta:tdm-reservation']);
    // From an index on: the ones before are passed over.
    expect((await all(pageSource(site.url('/page.html'), ctx).candidates(4))).map((c) => c.index)).toEqual([4, 5]);
    // Following same-origin links.
    const follow = context(LOOPBACK, {}, true);
    expect((await all(pageSource(site.url('/page.html'), follow.ctx).candidates(0))).map((c) => c.location)).toContain(site.url('/g.png'));
  });
});

describe('a manifest as a source', () => {
  const open = (body: string | Buffer, name: string, contentType?: string) => async () => ({
    body: (await import('node:stream')).Readable.from([Buffer.from(body)]),
    name,
    ...(contentType ? { contentType } : {}),
  });

  it.each([
    ['text', (u: string[]) => `# a list\n${u.join('\n')}\n\nftp://nope/x.png\n`, 'list.txt'],
    ['csv', (u: string[]) => `key,url,caption\n${u.map((x, i) => `${i},"${x}","a, b"`).join('\n')}\n`, 'shard.csv'],
    ['tsv', (u: string[]) => `url\tcaption\n${u.map((x) => `${x}\tx`).join('\n')}\n`, 'shard.tsv'],
    ['jsonl', (u: string[]) => `${u.map((x) => JSON.stringify({ url: x, caption: 'c' })).join('\n')}\n`, 'shard.jsonl'],
  ])('%s: every URL in order, relative ones resolved against the manifest', async (_f, make, name) => {
    const location = site.url(`/lists/${name}`);
    const list = ['/a.png', '/b.png', '../c.png'];
    const { ctx, skipped } = context();
    const found = await all(manifestSource(open(make(list), name), location, ctx).candidates(0));
    expect(found.map((c) => c.location)).toEqual([site.url('/a.png'), site.url('/b.png'), site.url('/c.png')]);
    if (name === 'list.txt') expect(skipped.map((s) => s.code)).toEqual(['invalid_source']);
    expect(Buffer.from((await found[2]!.load()).bytes).equals(png)).toBe(true);
  });

  it('parquet: the url column, row group by row group', async () => {
    const list = Array.from({ length: 2500 }, (_, i) => site.url(`/${'abcdef'[i % 6]}.png`));
    const buf = Buffer.from(
      parquetWriteBuffer({
        columnData: [
          { name: 'url', data: list, type: 'STRING' },
          { name: 'caption', data: list.map((_, i) => `c${i}`), type: 'STRING' },
        ],
        rowGroupSize: 1000,
      }),
    );
    const { ctx } = context();
    const found = await all(manifestSource(open(buf, 'part-0.parquet'), site.url('/part-0.parquet'), ctx).candidates(2498));
    expect(found.map((c) => [c.index, c.location])).toEqual([
      [2498, list[2498]],
      [2499, list[2499]],
    ]);
    await expect(all(manifestSource(open(Buffer.from('PAR1garbage'), 'x.parquet'), site.url('/x.parquet'), ctx).candidates(0))).rejects.toMatchObject({
      code: 'invalid_source',
    });
  });
});
