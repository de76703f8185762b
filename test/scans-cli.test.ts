/**
 * `optmark scan` end to end (`node dist/src/cli.js`; `npm run build` first): a folder with images marked
 * by `optmark mark` (fingerprint and provenance), one of them stripped of its metadata by ExifTool
 * (`-all=`) and counted as ours with no opt-out left, a plain one, a broken one; the JSONL report's fields
 * against `optmark verify` of the same files; a git repository on loopback refused without
 * --allow-network and scanned with it; a tar shard; exit statuses.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIGNAL_DATA_MINING } from '../src/marking/engine.js';
import { runBinary, TempDirs } from './helpers/files.js';
import { gitDaemon, makeRepo, type Served } from './helpers/git-repos.js';
import { ROOT } from './helpers/server.js';

const EXIFTOOL = join(ROOT, 'node_modules', 'exiftool-vendored.pl', 'bin', 'exiftool');
const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const temp = new TempDirs('optmark-scan-cli-');
const lines = (path: string): Array<Record<string, any>> =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

let dataDir: string;
let photos: string;
let root: string;
let daemon: Served;
const optmark = (args: string[]) => runBinary(args, { env: { OPTMARK_DATA_DIR: dataDir } });

beforeAll(async () => {
  dataDir = temp.make('optmark-data-');
  const plain = temp.make();
  const noise = await sharp({ create: { width: 512, height: 384, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 35 } } })
    .jpeg({ quality: 92 })
    .toBuffer();
  writeFileSync(join(plain, 'photo.jpg'), noise);
  const marked = temp.make();
  const m = await optmark(['mark', plain, '--out', marked, '--fingerprint', '--provenance']);
  expect(m.status).toBe(0);
  photos = temp.make();
  copyFileSync(join(marked, 'photo.jpg'), join(photos, 'marked.jpg'));
  copyFileSync(join(marked, 'photo.jpg'), join(photos, 'stripped.jpg'));
  const stripped = spawnSync(EXIFTOOL, ['-all=', '-overwrite_original', join(photos, 'stripped.jpg')], { encoding: 'utf8' });
  expect(stripped.status).toBe(0);
  copyFileSync(join(plain, 'photo.jpg'), join(photos, 'plain.jpg'));
  copyFileSync(join(CORPUS, 'pillow_broken.png'), join(photos, 'broken.png'));
  writeFileSync(join(photos, 'readme.txt'), 'not an image');
  root = temp.make();
  makeRepo(join(root, 'repo'), { 'img/marked.jpg': readFileSync(join(photos, 'marked.jpg')), 'img/plain.jpg': noise, 'README.md': '# r\n' });
  daemon = await gitDaemon(root);
});

afterAll(async () => {
  await daemon?.close();
  temp.removeAll();
});

describe('optmark scan', () => {
  it('a folder: the report has every field per image; marked-then-stripped counts as ours with no opt-out left; a broken image fails (exit 1)', async () => {
    const report = join(temp.make(), 'scan.jsonl');
    const r = await optmark(['scan', photos, '--report', report]);
    expect(r.status).toBe(1);
    const items = new Map(lines(report).map((l) => [l.location.slice(photos.length + 1), l]));
    expect([...items.keys()]).toEqual(['broken.png', 'marked.jpg', 'plain.jpg', 'stripped.jpg']);
    for (const item of items.values()) {
      expect(Object.keys(item)).toEqual([
        'location',
        'sha256',
        'format',
        'optedOut',
        'signals',
        'servedSignals',
        'provenance',
        'fingerprint',
        'c2pa',
        'record',
        'vault',
        'error',
      ]);
    }
    const marked = items.get('marked.jpg')!;
    expect(marked).toMatchObject({ format: 'jpeg', optedOut: true, signals: [SIGNAL_DATA_MINING], servedSignals: [], record: null, vault: null, error: null });
    expect(marked.provenance).toEqual({ present: true, valid: true, verifiable: true });
    expect(marked.fingerprint.present).toBe(true);
    const stripped = items.get('stripped.jpg')!;
    expect(stripped).toMatchObject({ optedOut: false, signals: [], error: null });
    expect(stripped.provenance.present).toBe(false);
    expect(stripped.fingerprint.present).toBe(true);
    expect(items.get('plain.jpg')).toMatchObject({ optedOut: false, error: null, fingerprint: { present: false } });
    expect(items.get('broken.png')!.error.code).toMatch(/^[a-z_]+$/);
    expect(items.get('broken.png')!.sha256).toBeNull();
    // The same answers as optmark verify of the same files (same lanes, same layers).
    const verifyReport = join(temp.make(), 'verify.jsonl');
    await optmark(['verify', photos, '--report', verifyReport]);
    for (const v of lines(verifyReport).filter((l) => l.status === 'done')) {
      const item = items.get(v.input.slice(photos.length + 1))!;
      expect([item.sha256, item.provenance, item.fingerprint.present, item.signals]).toEqual([
        v.sha256,
        v.provenance,
        v.fingerprint.present,
        [...v.signals, ...v.otherSignals],
      ]);
    }
    expect(r.stdout).toMatch(
      /^scanned 4 images: 1 opted out \(embedded\), 0 opted out where served, 2 with no opt-out; marked by this server 2, of which 1 with no embedded opt-out left; failed 1; skipped 1 \(not_an_image 1\)$/m,
    );
    expect(r.stdout).toMatch(new RegExp(`^${join(photos, 'stripped.jpg')}: NOT opted out; provenance: no tag; fingerprint: found`, 'm'));
  });

  it('a git repository on loopback: refused without --allow-network (exit 2, target_not_allowed), scanned with it', async () => {
    const url = daemon.url('repo');
    const refused = await optmark(['scan', url, '--skip-fingerprint']);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/\(target_not_allowed\)\n/);
    expect(daemon.connections()).toBe(0);
    const report = join(temp.make(), 'git.jsonl');
    const r = await optmark(['scan', url, '--allow-network', '127.0.0.0/8', '--report', report]);
    expect(r.status).toBe(0);
    expect(lines(report).map((l) => [l.location, l.optedOut, l.fingerprint.present])).toEqual([
      [`${url}#img/marked.jpg`, true, true],
      [`${url}#img/plain.jpg`, false, false],
    ]);
    expect(r.stdout).toMatch(/^scanned 2 images: 1 opted out .*marked by this server 1, of which 0 .*skipped 1 \(not_an_image 1\)$/m);
  });

  it('a tar shard and a folder in one run, --max-images stopping it, --report - on stdout', async () => {
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise((r) => pack.on('end', r));
    pack.entry({ name: 'a/000.jpg' }, readFileSync(join(photos, 'marked.jpg')));
    pack.finalize();
    await ended;
    const shard = join(temp.make(), 'shard-000.tar');
    writeFileSync(shard, Buffer.concat(chunks));
    const r = await optmark(['scan', shard, photos, '--report', '-', '--max-images', '3', '--skip-fingerprint']);
    const items = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(items.map((i) => i.location)).toEqual([`${shard}#a/000.jpg`, join(photos, 'broken.png'), join(photos, 'marked.jpg')]);
    expect(items[0]!.fingerprint).toEqual({ present: false, confidence: 0, blocks: 0 });
    expect(r.stderr).toMatch(/^scanned 3 images: .*$/m);
    expect(r.stderr).toMatch(/^stopped at --max-images 3$/m);
  });

  it.each([
    [['scan'], /missing required argument/],
    [['scan', 'ssh://example.org/r.git'], /ssh: sources are not scanned/],
    [['scan', '/tmp', '--allow-network', 'not-a-network'], /not a CIDR network/],
    [['scan', '/tmp', '--type', 'ftp'], /--type is git, page, manifest, tar or local/],
  ])('usage errors exit 2: %j', async (args, message) => {
    const r = await optmark(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });
});
