/**
 * `optmark site-signals`: the files it writes, read as a crawler reads them, and the nginx snippet run by a
 * real nginx (Debian's package: /usr/sbin/nginx) on a loopback port serving the written folder, its
 * headers and files read back over HTTP. Where nginx is not installed that case is skipped, and says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { AI_CRAWLERS, checkPolicyUrl, PolicyUrlError, robotsTxt } from '../src/signals/site.js';
import { optmarkHere } from './helpers/cli.js';
import { TempDirs, tree } from './helpers/files.js';

const temp = new TempDirs('optmark-site-');
const POLICY = 'https://example.org/ai-policy';
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
if (!NGINX) console.warn('\n*** site-signals.test.ts: nginx is NOT installed: the served-headers case is SKIPPED (apt-get install nginx-light) ***\n');

afterAll(() => temp.removeAll());

/** The group of robots.txt that names `agent` (RFC 9309: consecutive user-agent lines, then rules). */
function groupFor(robots: string, agent: string): string[] {
  const groups: { agents: string[]; rules: string[] }[] = [];
  let current: { agents: string[]; rules: string[] } | undefined;
  for (const raw of robots.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const [key, ...rest] = line.split(':');
    const value = rest.join(':').trim();
    if (key!.toLowerCase() === 'user-agent') {
      if (!current || current.rules.length > 0) groups.push((current = { agents: [], rules: [] }));
      current.agents.push(value.toLowerCase());
    } else current?.rules.push(`${key!.toLowerCase()}: ${value}`);
  }
  const named = groups.find((g) => g.agents.includes(agent.toLowerCase()));
  return (named ?? groups.find((g) => g.agents.includes('*')))?.rules ?? [];
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

describe('optmark site-signals', () => {
  it('writes robots.txt, ai.txt, tdmrep.json and the three header snippets from one policy', async () => {
    const out = join(temp.make(), 'site');
    const r = await optmarkHere(['site-signals', '--policy', POLICY, '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(tree(out)).toEqual([
      '.well-known/tdmrep.json',
      'ai.txt',
      'headers/Caddyfile',
      'headers/apache.conf',
      'headers/nginx.conf',
      'robots.txt',
      'well-known/tdmrep.json',
    ]);
    expect(readFileSync(join(out, 'well-known/tdmrep.json'), 'utf8')).toBe(readFileSync(join(out, '.well-known/tdmrep.json'), 'utf8'));
    const robots = readFileSync(join(out, 'robots.txt'), 'utf8');
    for (const agent of ['GPTBot', 'ClaudeBot', 'CCBot', 'Google-Extended', 'Applebot-Extended', 'PerplexityBot', 'Bytespider', 'meta-externalagent']) {
      expect(groupFor(robots, agent), agent).toEqual(['disallow: /', 'content-usage: train-ai=n']);
    }
    // Search crawlers keep crawling, under the AIPREF preference.
    expect(groupFor(robots, 'Googlebot')).toEqual(['allow: /', 'content-usage: train-ai=n']);
    expect(JSON.parse(readFileSync(join(out, '.well-known/tdmrep.json'), 'utf8'))).toEqual([{ location: '/', 'tdm-reservation': 1, 'tdm-policy': POLICY }]);
    expect(readFileSync(join(out, 'ai.txt'), 'utf8')).toMatch(/^User-Agent: \*\nDisallow: \/$/m);
    expect(readFileSync(join(out, 'headers/Caddyfile'), 'utf8')).toContain(`\ttdm-policy "${POLICY}"`);
    expect(readFileSync(join(out, 'headers/apache.conf'), 'utf8')).toContain('\tHeader always set X-Robots-Tag "noai, noimageai"');
  });

  it('leaves an existing robots.txt alone unless --force, and prints the files without --out', async () => {
    const out = temp.make();
    writeFileSync(join(out, 'robots.txt'), 'User-agent: *\nDisallow: /private\n');
    const r = await optmarkHere(['site-signals', '--policy', POLICY, '--out', out]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/robots\.txt: it exists/);
    expect(readFileSync(join(out, 'robots.txt'), 'utf8')).toBe('User-agent: *\nDisallow: /private\n');
    expect((await optmarkHere(['site-signals', '--policy', POLICY, '--out', out, '--force'])).status).toBe(0);
    expect(readFileSync(join(out, 'robots.txt'), 'utf8')).toBe(robotsTxt(POLICY));
    const printed = await optmarkHere(['site-signals', '--policy', POLICY]);
    expect(printed.status).toBe(0);
    expect(printed.stdout).toContain('==> .well-known/tdmrep.json <==\n[');
    expect(printed.stdout).toContain(`add_header tdm-policy "${POLICY}" always;`);
  });

  it.each([
    ['not a URL', 'example.org/policy'],
    ['not http', 'ftp://example.org/policy'],
    ['nginx variable syntax', 'https://example.org/$host'],
    ['a quote that would end the header value', "https://example.org/it's"],
  ])('refuses a policy that is %s (usage error, nothing written)', async (_, policy) => {
    const out = join(temp.make(), 'site');
    const r = await optmarkHere(['site-signals', '--policy', policy, '--out', out]);
    expect(r.status).toBe(2);
    expect(existsSync(out)).toBe(false);
    expect(() => checkPolicyUrl(policy)).toThrow(PolicyUrlError);
  });

  it('names only crawlers once', () => {
    const names = AI_CRAWLERS.map((c) => c.agent.toLowerCase());
    expect(new Set(names).size).toBe(names.length);
  });

  it.skipIf(!NGINX)('serves the headers and files through a real nginx with the generated snippet', async () => {
    const dir = temp.make();
    const site = join(dir, 'site');
    expect((await optmarkHere(['site-signals', '--policy', POLICY, '--out', site])).status).toBe(0);
    mkdirSync(join(site, 'images'));
    writeFileSync(join(site, 'images', 'a.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xd9]));
    // A page with a real image, for the repository scan below.
    writeFileSync(
      join(site, 'images', 'b.jpg'),
      await sharp({ create: { width: 32, height: 24, channels: 3, background: '#445566' } })
        .jpeg()
        .toBuffer(),
    );
    writeFileSync(
      join(site, 'index.html'),
      '<!doctype html><html><head><meta name="robots" content="noai"></head><body><img src="/images/b.jpg"></body></html>',
    );
    const port = await freePort();
    const prefix = join(dir, 'nginx');
    mkdirSync(prefix);
    writeFileSync(
      join(prefix, 'nginx.conf'),
      [
        'daemon off;',
        // As root, nginx's workers would run as nobody, who cannot read a private temporary folder.
        process.getuid?.() === 0 ? 'user root;' : '',
        'worker_processes 1;',
        `pid ${join(prefix, 'nginx.pid')};`,
        `error_log ${join(prefix, 'error.log')};`,
        'events { worker_connections 64; }',
        'http {',
        '  include /etc/nginx/mime.types;',
        `  access_log off; client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy; fastcgi_temp_path ${prefix}/fcgi;`,
        `  uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;`,
        `  server { listen 127.0.0.1:${port}; root ${site}; include ${join(site, 'headers/nginx.conf')}; }`,
        '}',
        '',
      ].join('\n'),
    );
    let nginx: ChildProcess | undefined;
    let stderr = '';
    try {
      nginx = spawn(NGINX!, ['-e', join(prefix, 'error.log'), '-p', prefix, '-c', join(prefix, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
      nginx.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const base = `http://127.0.0.1:${port}`;
      let image: Response | undefined;
      for (let i = 0; i < 100 && !image; i++) {
        image = await fetch(`${base}/images/a.jpg`).catch(() => undefined);
        if (!image) await new Promise((r) => setTimeout(r, 50));
      }
      expect(image, `nginx did not answer: ${stderr}`).toBeDefined();
      expect(image!.status).toBe(200);
      expect(image!.headers.get('x-robots-tag')).toBe('noai, noimageai');
      expect(image!.headers.get('tdm-reservation')).toBe('1');
      expect(image!.headers.get('tdm-policy')).toBe(POLICY);
      expect(image!.headers.get('content-usage')).toBe('train-ai=n');
      const tdm = await fetch(`${base}/.well-known/tdmrep.json`);
      expect(tdm.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await tdm.json()).toEqual([{ location: '/', 'tdm-reservation': 1, 'tdm-policy': POLICY }]);
      const robots = await (await fetch(`${base}/robots.txt`)).text();
      expect(groupFor(robots, 'GPTBot')).toEqual(['disallow: /', 'content-usage: train-ai=n']);
      // `always`: the headers go out with error answers too (a crawler probing a missing image).
      const missing = await fetch(`${base}/images/none.jpg`);
      expect(missing.status).toBe(404);
      expect(missing.headers.get('tdm-reservation')).toBe('1');
      // A repository scan of that site meets every one of them beside the image (issue #40 point 3).
      const report = join(dir, 'scan.jsonl');
      const scan = await optmarkHere(['scan', `${base}/index.html`, '--allow-network', '127.0.0.0/8', '--report', report, '--skip-fingerprint']);
      expect(scan.status, scan.stderr).toBe(0);
      const items = readFileSync(report, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(items).toHaveLength(1);
      expect(items[0].location).toBe(`${base}/images/b.jpg`);
      expect(items[0].optedOut).toBe(false);
      expect([...items[0].servedSignals].sort()).toEqual(
        [
          'ai.txt',
          'content-usage:train-ai=n',
          'meta:noai',
          'robots.txt',
          'robots.txt:content-usage',
          'tdm-policy',
          'tdm-reservation',
          'tdmrep.json',
          'x-robots-tag:noai',
          'x-robots-tag:noimageai',
        ].sort(),
      );
    } finally {
      nginx?.kill('SIGTERM');
      if (nginx && nginx.exitCode === null) await new Promise((r) => nginx!.once('exit', r));
    }
  });
});
