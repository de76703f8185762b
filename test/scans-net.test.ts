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
import { DEFAULT_SCAN_LIMITS, lowered, MAX_PER_HOST_DELAY_MS } from '../src/scans/limits.js';
import { AddressPolicy } from '../src/scans/net/address.js';
import { AGENT_TOKEN, createFetcher, USER_AGENT } from '../src/scans/net/fetcher.js';
import { AgentPool } from '../src/scans/net/pool.js';
import { openSource } from '../src/scans/sources/index.js';
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

  it('the body limit counts waiting on the network only: a slow reader of a fast answer reads it whole', async () => {
    const body = Buffer.alloc(4 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 2654435761) >>> 24;
    site.file('/fast-big.bin', body, { 'Content-Type': 'application/octet-stream' });
    const { ctx } = context(LOOPBACK, { bodyTimeoutMs: 300 });
    const r = await ctx.fetcher.stream(site.url('/fast-big.bin'), { maxBytes: 1e8 });
    const got: Buffer[] = [];
    let pauses = 0;
    // The consumer holds the body back for 3 x 250 ms, past the 300 ms limit, as a scan verifying a shard's images does.
    for await (const chunk of r.body) {
      got.push(chunk as Buffer);
      if (pauses < 3) {
        pauses++;
        await new Promise((done) => setTimeout(done, 250));
      }
    }
    expect(pauses).toBe(3);
    expect(Buffer.concat(got).equals(body)).toBe(true);
  });

  it('a server that stalls mid-body, or trickles a byte now and then, fails timeout', async () => {
    site.routes.set('/half', (_q, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': '2000' });
      res.write(Buffer.alloc(1000, 1));
    });
    site.routes.set('/trickle', (_q, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      const t = setInterval(() => res.write('x'), 50);
      res.on('close', () => clearInterval(t));
    });
    const half = context(LOOPBACK, { bodyTimeoutMs: 300 }).ctx;
    await expect(half.fetcher.get(site.url('/half'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'timeout' });
    // Streamed, read slowly: the stall is still met once the reader is waiting.
    const slow = await half.fetcher.stream(site.url('/half'), { maxBytes: 1e6 });
    await expect(
      (async () => {
        for await (const _ of slow.body) await new Promise((done) => setTimeout(done, 250));
      })(),
    ).rejects.toMatchObject({ code: 'timeout' });
    const trickle = context(LOOPBACK, { bodyTimeoutMs: 400 }).ctx;
    await expect(trickle.fetcher.get(site.url('/trickle'), { maxBytes: 1e6 })).rejects.toMatchObject({ code: 'timeout' });
  });

  it('a scan may lower every limit but perHostDelayMs, which it may only raise (up to 60 s)', () => {
    const server = { ...DEFAULT_SCAN_LIMITS, perHostDelayMs: 200 };
    // The runner applies a scan's options so (src/scans/jobs/runner.ts): an option of 0 keeps the server's 200.
    expect(lowered(server, { perHostDelayMs: 0 }).perHostDelayMs).toBe(200);
    expect(lowered(server, { perHostDelayMs: 199 }).perHostDelayMs).toBe(200);
    expect(lowered(server, { perHostDelayMs: 1500 }).perHostDelayMs).toBe(1500);
    expect(lowered(server, { perHostDelayMs: 10 * MAX_PER_HOST_DELAY_MS }).perHostDelayMs).toBe(MAX_PER_HOST_DELAY_MS);
    expect(MAX_PER_HOST_DELAY_MS).toBe(60_000);
    // Every other limit: lower only.
    const asked = { maxImages: 5, maxBytes: 10 * server.maxBytes, bodyTimeoutMs: 1, perHostConcurrency: 99 };
    expect(lowered(server, asked)).toEqual({ ...server, maxImages: 5, bodyTimeoutMs: 1 });
    // Not a number, negative or not finite: ignored.
    expect(lowered(server, { perHostDelayMs: -5, maxImages: Number.NaN } as Partial<ScanLimits>)).toEqual(server);
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

describe('keep-alive connections', () => {
  it('a URL-list scan of 20 images reuses connections; close() ends them', async () => {
    const s = await ScanSite.start('127.0.0.5');
    try {
      const list = Array.from({ length: 20 }, (_, i) => s.url(`/img/${i}.png`));
      s.file('/list.txt', `${list.join('\n')}\n`, { 'Content-Type': 'text/plain' });
      for (let i = 0; i < 20; i++) s.file(`/img/${i}.png`, png, { 'Content-Type': 'image/png' });
      const { ctx } = context();
      const source = await openSource(s.url('/list.txt'), ctx, 'manifest');
      const loads: Promise<Buffer>[] = [];
      for await (const c of source.candidates(0)) loads.push(c.load().then((l) => Buffer.from(l.bytes)));
      const bytes = await Promise.all(loads);
      await source.close();
      expect(bytes.map((b) => b.equals(png))).toEqual(list.map(() => true));
      expect(s.requests.filter((r) => r.startsWith('/img/'))).toHaveLength(20);
      expect(s.connections).toBeLessThan(s.requests.length);
      expect(s.connections).toBeLessThanOrEqual(DEFAULT_SCAN_LIMITS.perHostConcurrency);
      ctx.fetcher.close();
      for (let i = 0; i < 100 && s.open > 0; i++) await new Promise((done) => setTimeout(done, 20));
      expect(s.open).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('a kept-alive socket the server drops as it is reused: the request is sent once more, on a new one', async () => {
    const s = await ScanSite.start('127.0.0.6');
    try {
      const served = new WeakSet<object>();
      s.routes.set('/x.png', (req, res) => {
        served.add(req.socket);
        res.end(png);
      });
      // Drops any connection that served before, without an answer: the server closing an idle socket.
      s.routes.set('/drop.png', (req, res) => {
        if (served.has(req.socket)) return void req.socket.destroy();
        served.add(req.socket);
        res.end(png);
      });
      const { ctx } = context(LOOPBACK, { perHostConcurrency: 1 });
      expect((await ctx.fetcher.get(s.url('/x.png'), { maxBytes: 1e6 })).status).toBe(200);
      const r = await ctx.fetcher.get(s.url('/drop.png'), { maxBytes: 1e6 });
      expect([r.status, Buffer.from(r.body).equals(png)]).toEqual([200, true]);
      expect(s.requests.filter((x) => x === '/drop.png')).toHaveLength(2);
      ctx.fetcher.close();
    } finally {
      await s.close();
    }
  });

  it('a pooled socket is only for the same origin and checked address', () => {
    const pool = new AgentPool(4);
    try {
      const url = new URL('http://images.example:8080/a.png');
      const a = pool.agent(url, '93.184.216.34');
      expect(pool.agent(new URL('http://images.example:8080/b.png'), '93.184.216.34')).toBe(a);
      // The same name resolved elsewhere, another port, another scheme: never the same sockets.
      expect(pool.agent(url, '93.184.216.35')).not.toBe(a);
      expect(pool.agent(new URL('http://images.example:8081/a.png'), '93.184.216.34')).not.toBe(a);
      expect(pool.agent(new URL('https://images.example:8080/a.png'), '93.184.216.34')).not.toBe(a);
    } finally {
      pool.close();
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
