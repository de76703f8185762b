/**
 * `optmark mark` and `optmark verify` as batch tools, end to end on real files (`node dist/src/cli.js`,
 * run `npm run build` first), with ExifTool as the oracle of what was written: the report and its
 * SHA-256, lists on stdin (NUL-separated too), --skip-existing by time and by content, --jobs, exit
 * statuses, an interrupt that leaves no temporary file, and verify answering what the API answers.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toErrorShape } from '../src/errors.js';
import { protect } from '../src/marking/engine.js';
import { NOT_FOUND_FINGERPRINT, withoutFingerprint } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { expectConforms, expectError } from './helpers/assert.js';
import { optmarkHere } from './helpers/cli.js';
import { app1Xmp, jpegSegment } from './helpers/containers.js';
import { NS, packet, VARIANTS, vocab } from './helpers/fixtures.js';
import { noiseImages, runBinary, TempDirs, tree, type Run } from './helpers/files.js';
import { api, CLI, imageForm, request, ROOT, TestServer, waitFor, type Answer } from './helpers/server.js';

const EXIFTOOL = join(ROOT, 'node_modules', 'exiftool-vendored.pl', 'bin', 'exiftool');
/** The shared corpus, read in place. */
const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
/** `b` with more segments right after SOI (what it had kept). */
const afterSoi = (b: Buffer, ...segments: Uint8Array[]): Buffer => Buffer.concat([b.subarray(0, 2), ...segments, b.subarray(2)]);
/** `b` with one more XMP APP1 segment, right after SOI. */
const appendApp1 = (b: Buffer, p: Uint8Array): Buffer => afterSoi(b, app1Xmp(p));
const temp = new TempDirs('optmark-batch-');
const tempDir = (): string => temp.make();
const folder = (files: Record<string, Uint8Array | string>): string => temp.folder(files);
let images: Map<string, Buffer>;

function optmark(args: string[], options: { input?: string | Buffer; cwd?: string; dataDir?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const env = { OPTMARK_DATA_DIR: options.dataDir ?? temp.make('optmark-data-'), ...options.env };
  return runBinary(args, { env, input: options.input, cwd: options.cwd });
}

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const lines = (path: string): Array<Record<string, any>> =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

/** ExifTool's XMP-plus:DataMining of each file (raw value), keyed by path. */
function exiftoolDataMining(paths: string[]): Map<string, unknown> {
  const r = spawnSync(EXIFTOOL, ['-j', '-n', '-XMP-plus:DataMining', ...paths], { encoding: 'utf8' });
  const rows = JSON.parse(r.stdout) as Array<{ SourceFile: string; DataMining?: unknown }>;
  return new Map(rows.map((row) => [resolve(row.SourceFile), row.DataMining]));
}

/** POST /api/v1/verify with a query string. */
function verifyWithQuery(server: TestServer, query: string, key: string, image: Buffer, type = 'image/jpeg'): Promise<Answer> {
  const form = imageForm(image, 'x', type);
  return request(server, `/api/v1/verify?${query}`, {
    method: 'POST',
    headers: { 'Content-Type': form.contentType, Authorization: `Bearer ${key}` },
    body: form.body,
  });
}

beforeAll(async () => {
  images = await noiseImages(320, 240);
  // Larger than the 64 KiB a metadata-only verify reads first.
  images.set(
    'bigjpg',
    await sharp({ create: { width: 1024, height: 768, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 35 } } })
      .jpeg({ quality: 95 })
      .toBuffer(),
  );
});

afterAll(() => temp.removeAll());

describe('optmark mark as a batch tool', () => {
  it('--report: one line per file with the SHA-256 of the output as written; ExifTool reads the field in every output', async () => {
    const input = folder({
      'a.jpg': images.get('jpg')!,
      'sub/b.png': images.get('png')!,
      'sub/c.webp': images.get('webp')!,
      'notes.txt': 'not an image',
      'broken.jpg': Buffer.from([0xff, 0xd8, 0xff, 0xe1, 0xff, 0xff, 0x00]),
    });
    const out = join(tempDir(), 'out');
    const report = join(tempDir(), 'r.jsonl');
    const r = await optmark(['mark', input, '--out', out, '--report', report]);
    expect(r.status, r.stderr).toBe(1); // broken.jpg: partial failure
    expect(r.stdout).toMatch(/^done 3, skipped 1, failed 1 \(opt-out field\)$/m);
    const rep = lines(report);
    expect(rep).toHaveLength(5);
    const by = new Map(rep.map((l) => [relative(input, l.input), l]));
    for (const rel of ['a.jpg', 'sub/b.png', 'sub/c.webp']) {
      const l = by.get(rel)!;
      expect(l).toMatchObject({ status: 'done', code: null, output: join(out, rel), changed: true });
      const bytes = readFileSync(join(out, rel));
      expect(l.sha256).toBe(sha256(bytes));
      expect(l.bytes).toBe(bytes.length);
      expect(bytes.equals(Buffer.from(protect(images.get(rel.split('.').pop()!)!).bytes))).toBe(true);
    }
    expect(by.get('a.jpg')!.format).toBe('jpeg');
    expect(by.get('sub/b.png')!.format).toBe('png');
    expect(by.get('notes.txt')).toMatchObject({ status: 'skipped', code: 'unsupported_format', sha256: null });
    expect(by.get('broken.jpg')).toMatchObject({ status: 'failed', code: 'damaged_image', format: 'jpeg' });
    const et = exiftoolDataMining(['a.jpg', 'sub/b.png', 'sub/c.webp'].map((p) => join(out, p)));
    for (const v of et.values()) expect(v).toBe('DMI-PROHIBITED-AIMLTRAINING');
    expect(tree(out)).toEqual(['a.jpg', 'sub/b.png', 'sub/c.webp']); // no temporary file left
  });

  it('--files-from - with NUL-separated names (names with newlines and spaces), and a list file with relative names kept below --out', async () => {
    const input = folder({ 'odd\nname.jpg': images.get('jpg')!, 'with space.png': images.get('png')!, 'sub/x.webp': images.get('webp')! });
    const out = tempDir();
    const list = `${['odd\nname.jpg', 'with space.png', 'sub/x.webp'].map((p) => join(input, p)).join('\0')}\0`;
    const r = await optmark(['mark', '--files-from', '-', '-0', '--out', out, '--report', '-'], { input: list });
    expect(r.status, r.stderr).toBe(0);
    const rep = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(rep.map((l) => l.status)).toEqual(['done', 'done', 'done']);
    // Absolute names are kept whole below --out (as rsync --files-from does).
    for (const l of rep) {
      expect(l.output).toBe(join(out, l.input));
      expect(sha256(readFileSync(l.output))).toBe(l.sha256);
    }
    expect(r.stderr).toMatch(/^done 3, skipped 0, failed 0/m); // the summary moves to stderr when the report is stdout

    // A list file, newline-separated (CRLF too), names relative to the current folder; blank lines ignored.
    const out2 = tempDir();
    const listFile = join(tempDir(), 'list.txt');
    writeFileSync(listFile, 'with space.png\r\n\nsub/x.webp\n');
    const r2 = await optmark(['mark', '--files-from', listFile, '--out', out2], { cwd: input });
    expect(r2.status, r2.stderr).toBe(0);
    expect(tree(out2)).toEqual(['sub/x.webp', 'with space.png']);
    // A name that is not there is a failure of that file, not of the run's other files.
    const r3 = await optmark(['mark', '--files-from', '-', '--out', tempDir()], { input: `${join(input, 'with space.png')}\n${join(input, 'gone.jpg')}\n` });
    expect(r3.status).toBe(1);
    expect(r3.stdout).toMatch(/^done 1, skipped 0, failed 1/m);
    expect(r3.stdout).toMatch(/failed\s+\S*gone\.jpg: no such file or folder \(read_enoent\)/);
  });

  it('regression: a list or report file that cannot be opened is one line naming it, for mark and verify (verify crashed)', async () => {
    // Before: verify --files-from <missing> died of an unhandled 'error' event (the stream's open failed
    // while the lanes started), verify --report <missing dir>/r.jsonl printed a stack trace, and mark
    // printed the raw "ENOENT: no such file or directory, open ...".
    const input = folder({ 'a.jpg': images.get('jpg')! });
    const missing = join(tempDir(), 'no-such-dir', 'list.txt');
    const dir = tempDir();
    for (const [args, file, reason] of [
      [['verify', '--files-from', missing], missing, 'no such file or directory (ENOENT)'],
      [['mark', '--files-from', missing, '--out', tempDir()], missing, 'no such file or directory (ENOENT)'],
      [['verify', '--files-from', dir], dir, 'it is a directory, not a file (EISDIR)'],
      [['verify', input, '--report', missing], missing, 'no such file or directory (ENOENT)'],
      [['mark', input, '--out', tempDir(), '--report', dir], dir, 'it is a directory, not a file (EISDIR)'],
    ] as const) {
      const r = await optmark([...args]);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(`optmark: cannot open ${file}: ${reason}\n`);
    }
  });

  it("--skip-existing: by size and time (outputs carry their input's time), and =hash by content", async () => {
    const input = folder({ 'a.jpg': images.get('jpg')!, 'b.png': images.get('png')! });
    const out = tempDir();
    expect((await optmark(['mark', input, '--out', out])).status).toBe(0);
    for (const f of ['a.jpg', 'b.png']) expect(statSync(join(out, f)).mtimeMs).toBeCloseTo(statSync(join(input, f)).mtimeMs, 2);
    const report = join(tempDir(), 'r.jsonl');
    const again = await optmark(['mark', input, '--out', out, '--skip-existing', '--report', report]);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^done 0, skipped 2, failed 0/m);
    expect(lines(report).map((l) => [l.status, l.code])).toEqual([
      ['skipped', 'up_to_date'],
      ['skipped', 'up_to_date'],
    ]);
    // An input changed since (a new modification time) is done again; the other stays skipped.
    const later = new Date(Date.now() + 5000);
    utimesSync(join(input, 'a.jpg'), later, later);
    const third = await optmark(['mark', input, '--out', out, '--skip-existing', '--report', report]);
    expect(third.stdout).toMatch(/^done 1, skipped 1, failed 0/m);
    expect(lines(report).find((l) => l.input.endsWith('a.jpg'))).toMatchObject({ status: 'done' });

    // By content: an output holding exactly what marking gives is left alone (not even rewritten)...
    const before = statSync(join(out, 'b.png'));
    const byHash = await optmark(['mark', input, '--out', out, '--skip-existing=hash', '--report', report]);
    expect(byHash.stdout).toMatch(/^done 0, skipped 2, failed 0/m);
    for (const l of lines(report)) expect(l.sha256).toBe(sha256(readFileSync(l.output)));
    expect(statSync(join(out, 'b.png')).ino).toBe(before.ino);
    // ...and one that differs (even with the right time) is written again.
    writeFileSync(join(out, 'b.png'), 'damaged');
    const fixed = await optmark(['mark', input, '--out', out, '--skip-existing=hash']);
    expect(fixed.stdout).toMatch(/^done 1, skipped 1, failed 0/m);
    expect(readFileSync(join(out, 'b.png')).equals(Buffer.from(protect(images.get('png')!).bytes))).toBe(true);
  });

  it('--jobs: one lane or several threads give byte-identical outputs; in place, a file already marked is not rewritten', async () => {
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < 40; i++) files[`d${i % 3}/f${i}.${['jpg', 'png', 'webp'][i % 3]}`] = images.get(['jpg', 'png', 'webp'][i % 3]!)!;
    const input = folder(files);
    const one = tempDir();
    const three = tempDir();
    expect((await optmark(['mark', input, '--out', one, '--jobs', '1'])).status).toBe(0);
    const r = await optmark(['mark', input, '--out', three, '-j', '3']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^done 40, skipped 0, failed 0/m);
    expect(tree(three)).toEqual(tree(one));
    for (const p of tree(one)) expect(readFileSync(join(three, p)).equals(readFileSync(join(one, p))), p).toBe(true);

    const report = join(tempDir(), 'r.jsonl');
    const inPlace = await optmark(['mark', one, '--in-place', '--report', report]);
    expect(inPlace.status).toBe(0);
    for (const l of lines(report)) expect(l).toMatchObject({ status: 'done', changed: false });
  });

  it("the opt-out path loads neither the decoder, the fingerprint, the worker pool nor the server; the server's upload limit does not apply", async () => {
    const input = folder({ 'a.png': images.get('png')!, 'b.jpg': images.get('jpg')! });
    const loaded = (r: Run): string[] => [...new Set(r.stderr.match(/node_modules\/(?:@[^/\s"]+\/)?[^/\s"]+|optmark_\w+\.node/g) ?? [])];
    const heavy = /sharp|@img|piscina|optmark_fingerprint|uWebSockets|better-sqlite3|pg\b/;
    // NODE_DEBUG=module names every CommonJS module and addon loaded (sharp, piscina and the addons are).
    const mark = await optmark(['mark', input, '--out', tempDir()], { env: { NODE_DEBUG: 'module', OPTMARK_MAX_UPLOAD_BYTES: '2048' } });
    expect(mark.status, mark.stderr.slice(-500)).toBe(0);
    expect(mark.stdout).toMatch(/^done 2, skipped 0, failed 0/m); // both files are over a 2 KiB upload limit
    expect(loaded(mark).filter((m) => heavy.test(m))).toEqual([]);
    const meta = await optmark(['verify', input, '--skip-fingerprint'], { env: { NODE_DEBUG: 'module' } });
    expect(meta.status).toBe(0);
    expect(loaded(meta).filter((m) => heavy.test(m))).toEqual([]);
    // The control: the detector does load the decoder and the fingerprint addon.
    const full = await optmark(['verify', input], { env: { NODE_DEBUG: 'module' } });
    expect(full.status).toBe(0);
    expect(loaded(full)).toEqual(expect.arrayContaining(['node_modules/sharp', 'optmark_fingerprint.node']));
  });

  it.each([
    [['mark', 'x'], /--out <dir> is required/],
    [['mark', 'x', '--out', 'o', '--in-place'], /exclude each other/],
    [['mark', '--out', 'o'], /at least one file or folder/],
    [['mark', 'x', '--files-from', '-', '--out', 'o'], /not both/],
    [['mark', 'x', '--out', 'o', '--null'], /--null applies to --files-from/],
    [['mark', 'x', '--in-place', '--skip-existing'], /--skip-existing applies to --out/],
    [['mark', 'x', '--out', 'o', '--jobs', '0'], /whole number of 1 or more/],
    [['mark', 'x', '--out', 'o', '--skip-existing=size'], /'time' .* or 'hash'/],
    [['verify'], /at least one file or folder/],
    [['verify', 'x', '--jobs', 'many'], /whole number of 1 or more/],
  ])('usage error %j exits 2', async (args, message) => {
    const r = await optmarkHere(args as string[]); // the same program as the binary, in this process
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('every batch command answers --help with its options', async () => {
    for (const cmd of ['mark', 'verify']) {
      const r = await optmarkHere([cmd, '--help']);
      expect(r.status).toBe(0);
      for (const opt of ['--files-from', '--null', '--jobs', '--report']) expect(r.stdout).toContain(opt);
    }
    expect((await optmarkHere(['mark', '--help'])).stdout).toContain('--skip-existing');
    expect((await optmarkHere(['verify', '--help'])).stdout).toContain('--skip-fingerprint');
  });

  it('SIGINT: files under way finish, no temporary or partial file is left, the report has every output, exit 130 with how far it got', async () => {
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < 60; i++) files[`f${i}.png`] = images.get('png')!;
    const input = folder(files);
    const out = tempDir();
    const report = join(tempDir(), 'r.jsonl');
    const child = spawn(process.execPath, [CLI, 'mark', '--files-from', '-', '--out', out, '--report', report, '--jobs', '2'], {
      cwd: ROOT,
      env: { ...process.env, OPTMARK_DATA_DIR: tempDir() },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<number | null>((res) => child.on('close', (code) => res(code)));
    const names = Object.keys(files).map((f) => join(input, f));
    // The first five, then wait until the report shows them: the list stays open, so the run cannot end by itself.
    child.stdin.write(`${names.slice(0, 5).join('\n')}\n`);
    await waitFor('five report lines', () => (existsSync(report) && lines(report).length >= 5 ? true : undefined), 60_000);
    // The rest, and the interrupt right behind them: whatever was under way at that moment must finish whole.
    child.stdin.write(`${names.slice(5).join('\n')}\n`);
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stderr).toMatch(/interrupted after \d+ files \(done \d+, skipped 0, failed 0\)/);
    const rep = lines(report);
    expect(rep.length).toBeGreaterThanOrEqual(5);
    const written = tree(out);
    expect(written.filter((p) => p.endsWith('.tmp') || p.startsWith('.'))).toEqual([]);
    expect(written).toEqual(rep.map((l) => relative(out, l.output)).sort()); // every output reported, every report line written
    for (const l of rep) expect(sha256(readFileSync(l.output))).toBe(l.sha256);
  });
});

describe('optmark verify', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1' } });
    ({ key } = await server.account());
  });
  afterAll(async () => {
    await server?.dispose();
  });

  it("reports per file exactly what the API's verify answers for it, with and without the pixel detector", async () => {
    const input = folder({ 'plain.jpg': images.get('jpg')!, 'p.png': images.get('png')!, 'notes.txt': 'x' });
    const marked = tempDir();
    // Marked with a provenance tag by the same data directory (its key), so every field has something to say.
    expect((await server.cli('mark', join(input, 'p.png'), '--out', marked, '--provenance')).status).toBe(0);
    const files = [join(input, 'plain.jpg'), join(marked, 'p.png')];
    const report = join(tempDir(), 'v.jsonl');
    const r = await server.cli('verify', ...files, join(input, 'notes.txt'), '--report', report);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/plain\.jpg: NOT opted out; provenance: no tag/);
    expect(r.stdout).toMatch(/p\.png: opted out \(iptc\.dataMining\); provenance: valid/);
    expect(r.stdout).toMatch(/^verified 2: 1 opted out, 1 not; skipped 1, failed 0$/m);
    const skipped = join(tempDir(), 'vs.jsonl');
    expect((await server.cli('verify', ...files, '--skip-fingerprint', '--report', skipped)).status).toBe(0);
    const hashed = join(tempDir(), 'vh.jsonl');
    expect((await server.cli('verify', ...files, '--skip-fingerprint', '--sha256', '--report', hashed)).status).toBe(0);
    const withHash = new Map(lines(hashed).map((l) => [l.input, l]));
    const full = new Map(lines(report).map((l) => [l.input, l]));
    const meta = new Map(lines(skipped).map((l) => [l.input, l]));
    expect(full.get(join(input, 'notes.txt'))).toMatchObject({ status: 'skipped', code: 'unsupported_format' });
    for (const f of files) {
      const bytes = readFileSync(f);
      const type = f.endsWith('.png') ? 'image/png' : 'image/jpeg';
      const a = await api(server, 'verify', key, imageForm(bytes, 'x', type));
      expect(a.status).toBe(200);
      // The line is the API's answer plus the file's own fields (input, format, bytes, status, code).
      const api_ = (l: Record<string, any>): Record<string, any> => {
        const { input: _i, format: _f, bytes: _b, status: _s, code: _c, ...answer } = l;
        return answer;
      };
      const l = full.get(f)!;
      // `record` is the server's own (the dashboard's stored record of the call), not about the file.
      const { record: _record, ...answer } = a.json;
      expect(api_(l)).toEqual(answer);
      expect(l.sha256).toBe(sha256(bytes));
      expect(l.fingerprint.blocks).toBeGreaterThan(0); // the detector examined it

      // Without the detector: the same fields, the fingerprint as for an image not examined, no hash
      // (the metadata read alone) unless --sha256.
      const notExamined = { present: false, confidence: 0, blocks: 0 };
      expect(api_(meta.get(f)!)).toEqual({ ...answer, fingerprint: notExamined, sha256: null });
      expect(api_(withHash.get(f)!)).toEqual({ ...answer, fingerprint: notExamined });

      // The API's opt-in: the same answer, the fingerprint not examined.
      const s = await verifyWithQuery(server, 'fingerprint=skip', key, bytes, type);
      expect(s.status).toBe(200);
      expectConforms(s, 'post', '/api/v1/verify');
      expect(s.json).toEqual({ ...a.json, fingerprint: notExamined });
    }
  });

  it('?fingerprint= takes skip or nothing: another value is a 400 invalid_query that costs no verify unit', async () => {
    const { name, key: k } = await server.account({ verify: 5 });
    const a = await verifyWithQuery(server, 'fingerprint=maybe', k, images.get('jpg')!);
    expectError(a, 400, 'invalid_query');
    expect(a.json.error).toMatch(/fingerprint=skip/);
    expect((await server.usage(name)).verify.used).toBe(0);
    const b = await verifyWithQuery(server, 'fingerprint=skip', k, images.get('jpg')!);
    expect(b.status).toBe(200);
    expect((await server.usage(name)).verify.used).toBe(1);
  });

  it("--skip-fingerprint reads a large JPEG's head and end only, and says what a whole read says (a cut file is truncated)", async () => {
    const big = images.get('bigjpg')!;
    expect(big.length).toBeGreaterThan(2 * 64 * 1024);
    const input = folder({ 'whole.jpg': big, 'cut.jpg': big.subarray(0, big.length - 1000) });
    const parse = (r: Run) =>
      r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>)
        .sort((a, b) => (a.input < b.input ? -1 : 1));
    const meta = parse(await optmark(['verify', input, '--skip-fingerprint', '--report', '-']));
    const whole = parse(await optmark(['verify', input, '--skip-fingerprint', '--sha256', '--report', '-']));
    expect(meta.map((l) => ({ ...l, sha256: null }))).toEqual(whole.map((l) => ({ ...l, sha256: null })));
    expect(meta.find((l) => l.input.endsWith('whole.jpg'))!.warnings).toEqual([]);
    expect(meta.find((l) => l.input.endsWith('cut.jpg'))!.warnings.map((w: { code: string }) => w.code)).toEqual(['truncated_image_data']);
  });

  it("--skip-fingerprint answers every corpus file and crafted JPEG (heads of 16 KiB, 64 KiB and more, cut, trailing bytes, packets read before) exactly as the API's verifyReport", async () => {
    const big = images.get('bigjpg')!;
    const com = (n: number): Buffer => jpegSegment(0xfe, Buffer.alloc(n, 0x20));
    const files: Record<string, Buffer> = {};
    // Every crafted packet form in a JPEG whose image data runs far past the first bytes read.
    for (const v of VARIANTS) if (v.packets().every((p) => p.length < 60_000)) files[`v-${v.key}.jpg`] = afterSoi(big, ...v.packets().map((p) => app1Xmp(p)));
    const prohibit = Buffer.from(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') } }));
    const allow = Buffer.from(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } }));
    // The same packets again and again, interleaved with one a byte apart: what was read before must not leak.
    for (let i = 0; i < 6; i++) {
      files[`same-${i}-p.jpg`] = appendApp1(big, prohibit);
      files[`same-${i}-a.jpg`] = appendApp1(big, allow);
      files[`same-${i}-fresh.jpg`] = Buffer.from(protect(big).bytes);
    }
    files['head-20k.jpg'] = afterSoi(appendApp1(big, prohibit), com(20_000)); // segments past the first 16 KiB
    files['head-70k.jpg'] = afterSoi(appendApp1(big, prohibit), com(65_000), com(6_000)); // ... and past 64 KiB
    files['trailing.jpg'] = Buffer.concat([appendApp1(big, prohibit), Buffer.from('trailing bytes after EOI')]);
    files['trailing-far.jpg'] = Buffer.concat([appendApp1(big, prohibit), Buffer.alloc(70_000, 7)]);
    files['cut.jpg'] = appendApp1(big, prohibit).subarray(0, big.length - 5000);
    files['cut-at-ff.jpg'] = Buffer.concat([appendApp1(big, prohibit).subarray(0, big.length - 5000), Buffer.from([0xff])]);
    const input = folder(files);
    const dataDir = temp.make('optmark-data-');
    // A provenance tag, signed by the data directory's key (its digest covers the whole file).
    expect((await optmark(['mark', join(input, 'same-0-a.jpg'), '--out', join(input, 'tagged'), '--provenance'], { dataDir })).status).toBe(0);
    const { Keyring, verifyProvenance } = await import('../src/provenance/index.js');
    const keyring = await Keyring.open({ dataDir });
    const layers = withoutFingerprint({
      verifyProvenance: async (i: Uint8Array) => {
        const r = await verifyProvenance(i, keyring);
        return { present: r.present, valid: r.valid, verifiable: r.verifiable };
      },
      detectFingerprint: async () => ({ ...NOT_FOUND_FINGERPRINT }),
    });
    for (const jobs of ['1', '2']) {
      const r = await optmark(['verify', input, CORPUS, '--skip-fingerprint', '--report', '-', '--jobs', jobs], { dataDir });
      const got = r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>);
      expect(got.length).toBe(Object.keys(files).length + 1 + readdirSync(CORPUS).length);
      for (const l of got) {
        const bytes = readFileSync(l.input);
        if (l.status === 'skipped') {
          expect(l.code, l.input).toBe('unsupported_format');
          continue;
        }
        let want: Record<string, unknown>;
        try {
          const { sha256: _s, ...answer } = await verifyReport(bytes, layers);
          want = { status: 'done', code: null, ...answer };
        } catch (err) {
          want = { status: 'failed', code: toErrorShape(err).code };
        }
        const { input: _i, format: _f, bytes: size, sha256, message: _m, ...fields } = l;
        expect(fields, l.input).toEqual(want);
        expect([size, sha256], l.input).toEqual([bytes.length, null]);
      }
      const by = new Map(got.map((l) => [relative(input, l.input), l]));
      expect(by.get('same-3-p.jpg')!.optedOut).toBe(true);
      expect(by.get('same-3-a.jpg')!.optedOut).toBe(false);
      expect(by.get(join('tagged', 'same-0-a.jpg'))!.provenance).toEqual({ present: true, valid: true, verifiable: true });
      expect(by.get('cut.jpg')!.warnings.map((w: { code: string }) => w.code)).toEqual(['truncated_image_data']);
      expect(by.get('trailing-far.jpg')!.warnings).toEqual([]);
      expect(by.get(relative(input, join(CORPUS, 'c2pa_C_with_CAWG_data.jpg')))!.c2pa).toEqual({ present: true, valid: true, trainingMining: 'notAllowed' });
    }
  });

  it('a folder and a NUL-separated list give the same answers; an unreadable file is a failure (exit 1)', async () => {
    const input = folder({ 'a.jpg': images.get('jpg')!, 'b.webp': images.get('webp')!, 'c.png': Buffer.from('\x89PNG\r\n\x1a\nbroken', 'latin1') });
    const r1 = await optmark(['verify', input, '--skip-fingerprint', '--report', '-']);
    const r2 = await optmark(['verify', '--files-from', '-', '-0', '--skip-fingerprint', '--report', '-', '--jobs', '1'], {
      input: ['a.jpg', 'b.webp', 'c.png'].map((f) => join(input, f)).join('\0'),
    });
    expect(r1.status).toBe(1);
    expect(r2.status).toBe(1);
    const parse = (s: string) =>
      s
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>)
        .sort((a, b) => (a.input < b.input ? -1 : 1));
    expect(parse(r1.stdout)).toEqual(parse(r2.stdout));
    const c = parse(r1.stdout).find((l) => l.input.endsWith('c.png'))!;
    expect(c).toMatchObject({ status: 'failed', code: 'damaged_image', format: 'png' });
  });
});
