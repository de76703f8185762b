/**
 * Local sources (src/scans/sources/local.ts) and the dispatcher (src/scans/sources/index.ts): folders
 * walked in sorted order without following links, single files and file:// URLs, local tar shards, the
 * refusal where local sources are not allowed, and parseScanSource's table of valid and invalid sources.
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { openSource, parseScanSource } from '../src/scans/sources/index.js';
import { TempDirs } from './helpers/files.js';
import { codeOf, readAll, scanContext } from './helpers/scans.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const corpus = (name: string): Buffer => readFileSync(join(CORPUS, name));
const temp = new TempDirs('optmark-scan-local-');
afterAll(() => temp.removeAll());

const jpeg = corpus('sharp_testimgl.jpg');
const png = corpus('libpng_basn3p08.png');
const webp = corpus('libwebp_test.webp');

function photos(): string {
  const dir = temp.folder({ 'b/2.png': png, 'a.jpg': jpeg, 'b/1.webp': webp, 'notes.txt': 'text', 'b/c/image-without-extension': jpeg });
  const outside = temp.folder({ 'secret.jpg': jpeg });
  symlinkSync(join(outside, 'secret.jpg'), join(dir, 'b', 'link.jpg'));
  symlinkSync(outside, join(dir, 'linked-folder'));
  return dir;
}

describe('local folders and files', () => {
  it('a folder: images by content in sorted order with their bytes; links reported, never followed', async () => {
    const dir = photos();
    const { ctx, skipped } = scanContext(temp.make());
    const read = await readAll(await openSource(dir, ctx));
    expect(read.map((r) => r.location)).toEqual([join(dir, 'a.jpg'), join(dir, 'b/1.webp'), join(dir, 'b/2.png'), join(dir, 'b/c/image-without-extension')]);
    expect(read.map((r) => r.bytes!.equals([jpeg, webp, png, jpeg][read.indexOf(r)]!))).toEqual([true, true, true, true]);
    expect(skipped).toEqual([
      { location: join(dir, 'b/link.jpg'), code: 'link_not_followed' },
      { location: join(dir, 'linked-folder'), code: 'link_not_followed' },
      { location: join(dir, 'notes.txt'), code: 'not_an_image' },
    ]);
    // Indices count every entry in order: a chunk from an index starts there.
    const later = await readAll(await openSource(dir, ctx), read[2]!.index);
    expect(later.map((r) => r.location)).toEqual(read.slice(2).map((r) => r.location));
  });

  it('a single file, by path and by file:// URL; an image over the per-image limit fails too_large', async () => {
    const dir = temp.folder({ 'x.png': png, 'big.jpg': corpus('sharp_giant-image.jpg') });
    const { ctx } = scanContext(temp.make(), { limits: { maxImageBytes: 600_000 } });
    for (const source of [join(dir, 'x.png'), pathToFileURL(join(dir, 'x.png')).href]) {
      const read = await readAll(await openSource(source, ctx));
      expect(read.map((r) => [r.location, r.bytes!.equals(png)])).toEqual([[join(dir, 'x.png'), true]]);
    }
    expect((await readAll(await openSource(join(dir, 'big.jpg'), ctx))).map((r) => r.error)).toEqual(['too_large']);
  });

  it('a local tar shard, gzipped or not, whatever its name, is read as a shard', async () => {
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise((r) => pack.on('end', r));
    pack.entry({ name: 's/000.jpg' }, jpeg);
    pack.entry({ name: 's/000.txt' }, 'caption');
    pack.finalize();
    await ended;
    const plain = Buffer.concat(chunks);
    const dir = temp.make();
    writeFileSync(join(dir, 'shard.tar'), plain);
    writeFileSync(join(dir, 'shard.bin'), gzipSync(plain));
    for (const name of ['shard.tar', 'shard.bin']) {
      const { ctx, skipped } = scanContext(temp.make());
      const source = await openSource(join(dir, name), ctx);
      expect(source.kind).toBe('tar');
      const read = await readAll(source);
      expect(read.map((r) => [r.location, r.bytes!.equals(jpeg)])).toEqual([[`${join(dir, name)}#s/000.jpg`, true]]);
      expect(skipped).toEqual([{ location: `${join(dir, name)}#s/000.txt`, code: 'not_an_image' }]);
    }
  });

  it('local sources where they are not allowed: local_source_not_allowed, nothing read', async () => {
    const dir = photos();
    const { ctx } = scanContext(temp.make(), { allowLocal: false });
    for (const source of [dir, pathToFileURL(dir).href, join(dir, 'a.jpg')]) expect(await codeOf(openSource(source, ctx))).toBe('local_source_not_allowed');
  });

  it('a path that does not exist, or that is neither image, shard nor manifest: invalid_source', async () => {
    const dir = temp.folder({ 'notes.bin': 'not an image' });
    mkdirSync(join(dir, 'empty'));
    const { ctx } = scanContext(temp.make());
    expect(await codeOf(openSource(join(dir, 'missing'), ctx))).toBe('invalid_source');
    expect(await codeOf(openSource(join(dir, 'notes.bin'), ctx))).toBe('invalid_source');
    expect(await readAll(await openSource(join(dir, 'empty'), ctx))).toEqual([]);
  });
});

describe('parseScanSource', () => {
  const valid: [string, string | undefined, string][] = [
    ['https://example.org/photos.git', undefined, 'git'],
    ['https://example.org/photos', 'git', 'git'],
    ['git://example.org/photos', undefined, 'git'],
    ['http://example.org/index.html', undefined, 'http'],
    ['https://example.org/list.txt', 'manifest', 'manifest'],
    ['https://example.org/shard.tar', 'tar', 'tar'],
    ['https://example.org/', 'page', 'page'],
    ['file:///srv/photos', undefined, 'local'],
    ['/srv/photos', undefined, 'local'],
    ['photos/2024', undefined, 'local'],
  ];
  it.each(valid)('%s (type %s) is a %s source', (source, type, kind) => {
    expect(parseScanSource(source, type).kind).toBe(kind);
  });

  const invalid: [string, unknown, unknown][] = [
    ['credentials in the URL', 'https://user:pass@example.org/r.git', undefined],
    ['a user name alone', 'http://user@example.org/', undefined],
    ['ssh', 'ssh://example.org/r.git', undefined],
    ['ftp', 'ftp://example.org/list.txt', undefined],
    ['javascript', 'javascript:alert(1)', undefined],
    ["git's ext transport", 'ext::sh -c id', undefined],
    ['no host', 'http://:80/x', undefined],
    ['empty', '', undefined],
    ['white space', '   ', undefined],
    ['not a string', 42, undefined],
    ['a control character', 'https://example.org/\n', undefined],
    ['an unknown type', 'https://example.org/', 'ftp'],
    ['git:// as a page', 'git://example.org/r', 'page'],
    ['a URL as local', 'https://example.org/', 'local'],
    ['a path as git', '/srv/r', 'git'],
    ['too long', `https://example.org/${'a'.repeat(5000)}`, undefined],
  ];
  it.each(invalid)('%s: invalid_source', (_name, source, type) => {
    expect(() => parseScanSource(source, type)).toThrow(expect.objectContaining({ code: 'invalid_source' }));
  });
});
