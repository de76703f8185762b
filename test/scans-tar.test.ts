/**
 * Tar shards as scan sources (src/scans/sources/tar.ts), plain and gzipped, written with tar-stream and
 * re-split into awkward chunks: members judged by content with their exact bytes, `..` and absolute
 * names only names (nothing written anywhere: the folders are listed before and after), links passed
 * over, oversized members drained, a gzip bomb stopped at the byte budget, garbage and cut archives
 * failing archive_invalid.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createGzip, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { tarSource } from '../src/scans/sources/tar.js';
import { ScanError } from '../src/scans/types.js';
import { TempDirs, tree } from './helpers/files.js';
import { codeOf, readAll, scanContext } from './helpers/scans.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const corpus = (name: string): Buffer => readFileSync(join(CORPUS, name));
const temp = new TempDirs('optmark-scan-tar-');
afterAll(() => temp.removeAll());

type Member = { name: string; body?: Buffer; type?: 'symlink' | 'link' | 'directory'; linkname?: string };

async function shard(members: Member[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise((r) => pack.on('end', r));
  for (const m of members) {
    if (m.type) pack.entry({ name: m.name, type: m.type, linkname: m.linkname });
    else pack.entry({ name: m.name }, m.body!);
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** `bytes` as a stream of chunks of the given sizes, over and over (file-type's hostile chunk patterns). */
function chunked(bytes: Buffer, sizes: number[]): () => Promise<Readable> {
  return async () => {
    const parts: Buffer[] = [];
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const n = sizes[i % sizes.length]!;
      parts.push(bytes.subarray(at, at + n));
      at += n;
    }
    return Readable.from(parts, { objectMode: false });
  };
}

const jpeg = corpus('sharp_Landscape_9.jpg');
const png = corpus('pillow_itxt_chunks.png');
const webp = corpus('libwebp_test.webp');
const MEMBERS: Member[] = [
  { name: 'dir', type: 'directory' },
  { name: '000001.jpg', body: jpeg },
  { name: '000001.json', body: Buffer.from('{"caption":"a landscape"}') },
  { name: '../../escape.png', body: png },
  { name: '/etc/absolute.webp', body: webp },
  { name: 'passwd.jpg', type: 'symlink', linkname: '/etc/passwd' },
  { name: 'hard.jpg', type: 'link', linkname: '000001.jpg' },
  { name: 'big.jpg', body: corpus('sharp_giant-image.jpg') },
];

describe.each([
  ['plain', (b: Buffer) => b],
  ['gzipped', (b: Buffer) => gzipSync(b)],
])('a %s shard', (_name, wrap) => {
  it.each([[[1]], [[7, 512, 3]], [[65536]]])('members by content with their bytes, links and oversize reported, nothing written (chunks %j)', async (sizes) => {
    const bytes = wrap(await shard(MEMBERS));
    const folder = temp.make();
    const before = { folder: tree(folder), tmp: readdirSync(tmpdir()).filter((n) => n.includes('escape') || n.includes('absolute')) };
    const { ctx, skipped } = scanContext(folder, { limits: { maxImageBytes: 600_000 } });
    const source = tarSource(chunked(bytes, sizes), 'https://example.org/shard-0.tar', ctx);
    const read = await readAll(source);
    const at = (m: string): string => `https://example.org/shard-0.tar#${m}`;
    expect(read.map((r) => [r.location, r.error ?? null])).toEqual([
      [at('000001.jpg'), null],
      [at('../../escape.png'), null],
      [at('/etc/absolute.webp'), null],
      [at('big.jpg'), 'too_large'],
    ]);
    expect(read[0]!.bytes!.equals(jpeg)).toBe(true);
    expect(read[1]!.bytes!.equals(png)).toBe(true);
    expect(read[2]!.bytes!.equals(webp)).toBe(true);
    expect(skipped).toEqual([
      { location: at('000001.json'), code: 'not_an_image' },
      { location: at('passwd.jpg'), code: 'link_not_followed' },
      { location: at('hard.jpg'), code: 'link_not_followed' },
    ]);
    // Every member but the folder numbered in order; a chunk from an index reads past the ones before.
    expect(read.map((r) => r.index)).toEqual([0, 2, 3, 6]);
    const later = await readAll(source, 3);
    expect(later.map((r) => r.location)).toEqual([at('/etc/absolute.webp'), at('big.jpg')]);
    await source.close();
    expect(tree(folder)).toEqual(before.folder);
    expect(readdirSync(tmpdir()).filter((n) => n.includes('escape') || n.includes('absolute'))).toEqual(before.tmp);
  });
});

describe('hostile archives', () => {
  it('a gzip bomb stops at the byte budget (budget_exceeded), long before it is unpacked', async () => {
    // 256 MiB of zeros after a member's header compress to about 250 KiB.
    const header = (await shard([{ name: 'zeros.jpg', body: Buffer.alloc(0) }])).subarray(0, 512);
    const zeros = Buffer.alloc(1 << 20);
    const parts = (function* () {
      yield header;
      for (let i = 0; i < 256; i++) yield zeros;
    })();
    const gzChunks: Buffer[] = [];
    for await (const c of Readable.from(parts, { objectMode: false }).pipe(createGzip({ level: 9 }))) gzChunks.push(c as Buffer);
    const gz = Buffer.concat(gzChunks);
    expect(gz.length).toBeLessThan(1 << 20);
    const { ctx } = scanContext(temp.make(), { limits: { maxBytes: 32 << 20 } });
    expect(await codeOf(readAll(tarSource(async () => Readable.from([gz], { objectMode: false }), 'bomb.tar.gz', ctx)))).toBe('budget_exceeded');
  });

  it.each([
    ['garbage', () => Buffer.from('this is not a tar archive at all '.repeat(40))],
    ['a cut archive', async () => (await shard(MEMBERS)).subarray(0, 700)],
    ['a cut gzip stream', async () => gzipSync(await shard(MEMBERS)).subarray(0, 900)],
    ['a damaged gzip stream', async () => Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), Buffer.alloc(600, 0xff)])],
  ])('%s fails archive_invalid', async (_name, make) => {
    const bytes = await make();
    const { ctx } = scanContext(temp.make());
    expect(await codeOf(readAll(tarSource(async () => Readable.from([bytes], { objectMode: false }), 'x.tar', ctx)))).toBe('archive_invalid');
  });

  it('a stream that fails (a fetch past its limit) fails the source with its own code, gzipped or not', async () => {
    for (const head of [Buffer.alloc(0), Buffer.from([0x1f, 0x8b])]) {
      const { ctx } = scanContext(temp.make());
      const failing = async (): Promise<Readable> =>
        Readable.from(
          (async function* () {
            yield Buffer.concat([head, Buffer.alloc(100)]);
            throw new ScanError('too_large', 'the body passed its limit');
          })(),
          { objectMode: false },
        );
      expect(await codeOf(readAll(tarSource(failing, 'x.tar', ctx)))).toBe('too_large');
    }
  });
});
