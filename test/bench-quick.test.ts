// The quick parts of the load test's command and servers: clearing the corpus cache, refusing bad
// options, and the transport baseline's answers. The smoke run itself (a real server under stepped load,
// a few minutes on a busy machine) is in test/long/bench-smoke.test.ts, run by `npm run test:long`.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');
let out = '';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` first');
  out = mkdtempSync(join(tmpdir(), 'optmark-bench-smoke-'));
});
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('bench load (quick)', () => {
  it('--clear-cache removes the generated corpus cache from its one place', () => {
    const cache = mkdtempSync(join(out, 'cache-'));
    // A temporary directory of its own too: --clear-cache also removes the cache's old place there.
    mkdirSync(join(cache, 'tmp'));
    const env = { ...process.env, XDG_CACHE_HOME: cache, TMPDIR: join(cache, 'tmp') };
    mkdirSync(join(cache, 'optmark', 'bench-corpus-v1'), { recursive: true });
    writeFileSync(join(cache, 'optmark', 'bench-corpus-v1', 'jpeg-1mp.jpg'), Buffer.alloc(300_000));
    const r = spawnSync(process.execPath, [CLI, 'bench', 'load', '--clear-cache'], { cwd: ROOT, encoding: 'utf8', env });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`removed ${join(cache, 'optmark', 'bench-corpus-v1')} (0.3 MB)`);
    expect(readdirSync(join(cache, 'optmark'))).toEqual([]);
    expect(readdirSync(cache).sort()).toEqual(['optmark', 'tmp']);
    const again = spawnSync(process.execPath, [CLI, 'bench', 'load', '--clear-cache'], { cwd: ROOT, encoding: 'utf8', env });
    expect(again.stdout).toContain(`no corpus cache to clear (it lives in ${join(cache, 'optmark')})`);
  });

  it('refuses unknown scenarios and a --url without a key', () => {
    const bad = spawnSync(process.execPath, [CLI, 'bench', 'load', '--scenarios', 'upload'], { cwd: ROOT, encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('unknown scenario');
    const nokey = spawnSync(process.execPath, [CLI, 'bench', 'load', '--url', 'http://127.0.0.1:1'], { cwd: ROOT, encoding: 'utf8' });
    expect(nokey.status).toBe(2);
    expect(nokey.stderr).toContain('--key');
    const mix = spawnSync(process.execPath, [CLI, 'bench', 'load', '--mix', 'protect=1,upload=1'], { cwd: ROOT, encoding: 'utf8' });
    expect(mix.status).toBe(2);
    expect(mix.stderr).toContain('--mix expects protect=N,verify=N');
  });
});

describe('the transport baseline (bench/load/transport.ts)', () => {
  it("reads a whole upload and answers 200 with a protect answer's length, for uploads of any size one after another", async () => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'load', 'transport.js'), '0', '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((res, rej) => {
        child.stdout.once('data', (d: Buffer) => res(Number(/listening (\d+)/.exec(d.toString())?.[1])));
        child.once('exit', (code) => rej(new Error(`exited ${code}`)));
      });
      for (const size of [3_000_000, 10, 3_000_000, 5_000_000]) {
        const body = Buffer.alloc(size, 7);
        const r = await fetch(`http://127.0.0.1:${port}/api/v1/protect`, { method: 'POST', body });
        expect(r.status).toBe(200);
        expect((await r.arrayBuffer()).byteLength).toBe(4 * Math.ceil(size / 3) + 200);
      }
      // A body past optmark's upload limit (plus framing) is refused from its head, before any of it is read.
      const head = await new Promise<string>((res, rej) => {
        const sock = connect(port, '127.0.0.1', () => sock.write('POST /api/v1/protect HTTP/1.1\r\nHost: x\r\nContent-Length: 30000000\r\n\r\n'));
        sock.once('data', (d: Buffer) => {
          res(d.toString('latin1'));
          sock.destroy();
        });
        sock.once('error', rej);
      });
      expect(head.startsWith('HTTP/1.1 413')).toBe(true);
    } finally {
      child.kill('SIGTERM');
    }
  });
});

describe("the transport baseline with protect work (its workers run optmark's own protect)", () => {
  it("answers a multipart JPEG with optmark's protect answer, and a multipart without an image with 400", async () => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'load', 'transport.js'), '0', '1', 'protect'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const port = await new Promise<number>((res, rej) => {
        child.stdout.once('data', (d: Buffer) => res(Number(/listening (\d+)/.exec(d.toString())?.[1])));
        child.once('exit', (code) => rej(new Error(`exited ${code}`)));
      });
      const jpeg = readFileSync(join(ROOT, '..', 'shared', 'corpus', 'exiftool_Writer.jpg'));
      const form = new FormData();
      form.append('image', new Blob([jpeg], { type: 'image/jpeg' }), 'w.jpg');
      const r = await fetch(`http://127.0.0.1:${port}/api/v1/protect`, { method: 'POST', body: form });
      expect(r.status).toBe(200);
      const answer = (await r.json()) as { imageBase64: string; mimeType: string; sha256: string; signals: string[] };
      const marked = Buffer.from(answer.imageBase64, 'base64');
      expect(marked.subarray(0, 2).toString('hex')).toBe('ffd8');
      expect(marked.includes('DMI-PROHIBITED-AIMLTRAINING')).toBe(true);
      expect(answer.sha256).toBe(createHash('sha256').update(marked).digest('hex'));
      expect(answer).toMatchObject({ mimeType: 'image/jpeg', signals: ['iptc.dataMining'] });
      const text = new FormData();
      text.append('note', 'no image here');
      expect((await fetch(`http://127.0.0.1:${port}/api/v1/protect`, { method: 'POST', body: text })).status).toBe(400);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
