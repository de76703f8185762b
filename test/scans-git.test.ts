/**
 * Git repositories as scan sources (src/scans/sources/git.ts), with the system git against real
 * repositories made here and served on loopback by `git daemon` (git://) and `git http-backend` (smart
 * HTTP): images found by content in path order with their exact bytes, LFS pointers, symlinks and
 * submodules reported and never followed, hooks never run, nothing checked out, the byte limit,
 * a refused address (git never connects), redirects refused.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { protect } from '../src/marking/engine.js';
import { gitSource } from '../src/scans/sources/git.js';
import { TempDirs, tree } from './helpers/files.js';
import { gitDaemon, gitHttp, makeRepo, repoEnv, type Served } from './helpers/git-repos.js';
import { codeOf, readAll, scanContext } from './helpers/scans.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const corpus = (name: string): Buffer => readFileSync(join(CORPUS, name));
const LOOPBACK = ['127.0.0.0/8'];
const temp = new TempDirs('optmark-scan-git-');

const LFS = 'version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n';
const SUBMODULE_COMMIT = 'a'.repeat(40);
let files: Record<string, Buffer>;
let root: string;
let daemon: Served;
let http: Served;

beforeAll(async () => {
  const jpeg = corpus('sharp_Landscape_9.jpg');
  files = {
    'a/landscape.jpg': jpeg,
    'a/marked.jpg': Buffer.from(protect(jpeg).bytes),
    'b/no-extension': corpus('pillow_itxt_chunks.png'),
    'b/small.webp': corpus('libwebp_test.webp'),
    'c/big.jpg': corpus('sharp_giant-image.jpg'),
  };
  root = temp.make();
  makeRepo(join(root, 'photos'), {
    ...files,
    'README.md': '# photos\n',
    'lfs/photo.jpg': LFS,
    'link.jpg': { symlink: '/etc/passwd' },
    'vendor/sub': { submodule: SUBMODULE_COMMIT },
    // A repository's own hook files are only files: nothing of a clone's `hooks/` comes from the remote.
    'hooks/post-checkout': '#!/bin/sh\ntouch /tmp/optmark-scan-hook-ran\n',
  });
  makeRepo(join(root, 'empty-tree'), { 'notes.txt': 'no images here\n' });
  // 24 MiB of incompressible blobs, each under the per-image limit.
  const huge: Record<string, Buffer> = {};
  for (let i = 0; i < 24; i++) huge[`blob-${i}.bin`] = randomBytes(1 << 20);
  makeRepo(join(root, 'huge'), huge);
  hugeTree(join(root, 'tree'), 30_000);
  daemon = await gitDaemon(root);
  http = await gitHttp(root, { redirectTo: 'http://127.0.0.1:9/' });
});

/** A repository whose one commit has `n` paths (one small blob under every name), made with git fast-import. */
function hugeTree(dir: string, n: number): void {
  mkdirSync(dir, { recursive: true });
  const env = repoEnv(dir);
  execFileSync('git', ['init', '--quiet', '--initial-branch=main'], { cwd: dir, env });
  const lines = ['blob', 'mark :1', 'data 5', 'hello', 'commit refs/heads/main', 'committer T <t@example.org> 0 +0000', 'data 2', 'x'];
  for (let i = 0; i < n; i++) lines.push(`M 100644 :1 d${i % 100}/file-with-a-long-name-${String(i).padStart(6, '0')}.txt`);
  execFileSync('git', ['fast-import', '--quiet'], { cwd: dir, env, input: `${lines.join('\n')}\n` });
}

afterAll(async () => {
  await daemon?.close();
  await http?.close();
  temp.removeAll();
});

const LIMITS = { maxImageBytes: 600_000 };

describe.each([
  ['git://', () => daemon],
  ['smart HTTP', () => http],
])('a repository over %s', (_name, served) => {
  it('yields every image by content in path order with its exact bytes; reports LFS pointers, links, submodules, large blobs and the rest', async () => {
    const folder = temp.make();
    const url = served().url('photos');
    const { ctx, skipped } = scanContext(folder, { allow: LOOPBACK, limits: LIMITS });
    const source = gitSource(url, ctx);
    const read = await readAll(source);
    expect(read.map((r) => r.location)).toEqual([
      `${url}#a/landscape.jpg`,
      `${url}#a/marked.jpg`,
      `${url}#b/no-extension`,
      `${url}#b/small.webp`,
      `${url}#lfs/photo.jpg`,
    ]);
    for (const r of read.filter((x) => x.bytes)) expect(r.bytes!.equals(files[r.location.split('#')[1]!]!)).toBe(true);
    expect(read.find((r) => r.location.endsWith('#lfs/photo.jpg'))!.error).toBe('lfs_pointer');
    expect(skipped).toEqual(
      expect.arrayContaining([
        { location: `${url}#README.md`, code: 'not_an_image' },
        { location: `${url}#c/big.jpg`, code: 'too_large' },
        { location: `${url}#hooks/post-checkout`, code: 'not_an_image' },
        { location: `${url}#link.jpg`, code: 'link_not_followed' },
        { location: `${url}#vendor/sub`, code: 'submodule' },
      ]),
    );
    expect(skipped).toHaveLength(5);
    // Indices are the entries' places in path order: a later chunk starts where it is told to.
    const indices = read.map((r) => r.index);
    const later = await readAll(source, indices[2]!);
    expect(later.map((r) => r.index)).toEqual(indices.slice(2));
    // Nothing checked out: no path of the repository exists in the scan's folder, only the bare clone.
    const written = tree(folder);
    expect(written.some((p) => p.endsWith('link.jpg') || p.endsWith('landscape.jpg') || p.includes('hooks/post-checkout'))).toBe(false);
    expect(written.every((p) => /^git-[^/]+\/repo\.git\//.test(p))).toBe(true);
    await source.close();
    expect(tree(folder)).toEqual([]);
  });

  it('a clone past the byte limit is stopped: budget_exceeded, and close() leaves the folder empty', async () => {
    const folder = temp.make();
    const { ctx } = scanContext(folder, { allow: LOOPBACK, limits: { maxBytes: 4 << 20 } }); // blobs under the per-image limit: all transferred
    const source = gitSource(served().url('huge'), ctx);
    expect(await codeOf(readAll(source))).toBe('budget_exceeded');
    await source.close();
    expect(tree(folder)).toEqual([]);
  });

  it('a huge tree (30,000 paths) past the byte limit is stopped too: budget_exceeded', async () => {
    const folder = temp.make();
    const { ctx } = scanContext(folder, { allow: LOOPBACK, limits: { maxBytes: 256 << 10 } });
    const source = gitSource(served().url('tree'), ctx);
    expect(await codeOf(readAll(source))).toBe('budget_exceeded');
    await source.close();
    expect(tree(folder)).toEqual([]);
  });

  it('a repository with no image yields nothing and says why', async () => {
    const { ctx, skipped } = scanContext(temp.make(), { allow: LOOPBACK });
    const url = served().url('empty-tree');
    expect(await readAll(gitSource(url, ctx))).toEqual([]);
    expect(skipped).toEqual([{ location: `${url}#notes.txt`, code: 'not_an_image' }]);
  });

  it('an address the policy refuses: target_not_allowed, and git never connects', async () => {
    const before = served().connections();
    const { ctx } = scanContext(temp.make());
    expect(await codeOf(readAll(gitSource(served().url('photos'), ctx)))).toBe('target_not_allowed');
    expect(served().connections()).toBe(before);
  });
});

describe('git with hostile surroundings', () => {
  it("hooks from the user's config and templates never run (the same setup does run them for a plain clone)", async () => {
    const home = temp.make();
    const marker = join(home, 'hook-ran');
    const hooks = join(home, 'hooks');
    mkdirSync(join(home, 'template', 'hooks'), { recursive: true });
    mkdirSync(hooks);
    const hook = `#!/bin/sh\necho "$0" >> ${marker}\n`;
    for (const dir of [hooks, join(home, 'template', 'hooks')]) {
      for (const name of ['reference-transaction', 'post-checkout', 'post-index-change']) {
        writeFileSync(join(dir, name), hook);
        chmodSync(join(dir, name), 0o755);
      }
    }
    const gitconfig = join(home, 'gitconfig');
    writeFileSync(gitconfig, `[core]\n\thooksPath = ${hooks}\n[init]\n\ttemplateDir = ${join(home, 'template')}\n`);
    const hostile = { GIT_CONFIG_GLOBAL: gitconfig, GIT_TEMPLATE_DIR: join(home, 'template'), HOME: home };
    // The control: a plain clone with this environment runs the hooks.
    // (Asynchronous: the daemon's relay runs in this process.)
    await promisify(execFile)('git', ['clone', '--quiet', daemon.url('photos'), join(home, 'control')], { env: { ...repoEnv(home), ...hostile } });
    expect(existsSync(marker)).toBe(true);
    writeFileSync(marker, '');
    const saved = { ...process.env };
    Object.assign(process.env, hostile);
    try {
      const { ctx } = scanContext(temp.make(), { allow: LOOPBACK, limits: LIMITS });
      const source = gitSource(http.url('photos'), ctx);
      expect((await readAll(source)).length).toBe(5);
      await source.close();
    } finally {
      for (const k of Object.keys(hostile)) delete process.env[k];
      Object.assign(process.env, saved);
    }
    expect(readFileSync(marker, 'utf8')).toBe('');
  });

  it('an HTTP redirect is not followed (git_failed), so the address check cannot be walked around', async () => {
    const { ctx } = scanContext(temp.make(), { allow: LOOPBACK });
    expect(await codeOf(readAll(gitSource(http.url('moved/photos'), ctx)))).toBe('git_failed');
  });

  it('a URL with credentials, or of another scheme, is invalid_source before anything runs', async () => {
    for (const url of ['https://user:secret@example.org/repo.git', 'ssh://example.org/repo.git', 'file:///etc', 'ext::sh -c touch% /tmp/x']) {
      const { ctx } = scanContext(temp.make(), { allow: LOOPBACK });
      expect(await codeOf(readAll(gitSource(url, ctx)))).toBe('invalid_source');
    }
  });

  it('a host name is pinned to the address checked (http.curloptResolve): localhost reaches the loopback server', async () => {
    const url = http.url('photos').replace('127.0.0.1', 'localhost');
    const { ctx } = scanContext(temp.make(), { allow: LOOPBACK, limits: LIMITS });
    const source = gitSource(url, ctx);
    expect((await readAll(source)).map((r) => r.location)[0]).toBe(`${url}#a/landscape.jpg`);
    await source.close();
  });
});
