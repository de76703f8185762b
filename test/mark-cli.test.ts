/**
 * The operator's layer path end to end: `node dist/src/cli.js mark|signing-key ...` on temporary
 * folders and data directories (run `npm run build` first), and a worker pool from dist/ standing in
 * for the running server, which must pick up a key rotated by the CLI.
 */
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFingerprint, loadFingerprintSecret } from '../src/fingerprint/index.js';
import { read } from '../src/marking/engine.js';
import { Keyring, NS_PROVENANCE, verifyProvenance } from '../src/provenance/index.js';
import { laneInit } from '../src/batch/command.js';
import { Lane } from '../src/batch/work.js';
import { loadConfig } from '../src/config.js';
import { optmarkHere } from './helpers/cli.js';
import { createTestDatabase } from './helpers/stores.js';
import { noiseImages, runBinary, TempDirs, tree, type Run } from './helpers/files.js';
import { imageForm, testPool } from './helpers/server.js';

const temp = new TempDirs('optmark-mark-');
const tempDir = (): string => temp.make();
const folder = (files: Record<string, Uint8Array | string>): string => temp.folder(files);
let images: Map<string, Buffer>;

function optmark(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runBinary(args, { env: { OPTMARK_DATA_DIR: dataDir, OPTMARK_POOL_SIZE: '2', ...env } });
}

beforeAll(async () => {
  images = await noiseImages(256, 192);
});

afterAll(() => temp.removeAll());

describe('optmark mark', () => {
  it('marks a folder tree with --provenance, keeps relative paths, skips non-images and reports failures', async () => {
    const dataDir = tempDir();
    const input = folder({
      'a.jpg': images.get('jpg')!,
      'sub/b.png': images.get('png')!,
      'sub/deeper/c.webp': images.get('webp')!,
      'd.JPEG': images.get('jpg')!,
      'photo-without-extension': images.get('png')!,
      'notes.txt': 'not an image',
      'fake.jpg': 'a text file with an image name',
      'broken.jpg': Buffer.from([0xff, 0xd8, 0xff, 0xe1, 0xff, 0xff, 0x00]),
    });
    const before = new Map(tree(input).map((p) => [p, readFileSync(join(input, p))]));
    const out = join(tempDir(), 'marked');
    const r = await optmark(dataDir, ['mark', input, '--out', out, '--provenance']);

    expect(r.status, r.stderr).toBe(1); // broken.jpg failed
    expect(r.stdout).toMatch(/^done 5, skipped 2, failed 1 \(opt-out field, provenance \(key [0-9a-f]{16}\)\)$/m);
    expect(r.stdout).toMatch(/skipped\s+\S*notes\.txt: not a JPEG, PNG or WebP image/);
    expect(r.stdout).toMatch(/skipped\s+\S*fake\.jpg: not a JPEG, PNG or WebP image/);
    expect(r.stdout).toMatch(/failed\s+\S*broken\.jpg: .*\(damaged_image\)/);
    expect(r.stderr).not.toContain('\x1b['); // no progress bar when stderr is not a terminal
    expect(tree(out)).toEqual(['a.jpg', 'd.JPEG', 'photo-without-extension.png', 'sub/b.png', 'sub/deeper/c.webp']);

    const ring = await Keyring.open({ dataDir });
    for (const p of tree(out)) {
      const bytes = readFileSync(join(out, p));
      expect(read(bytes).optedOut, p).toBe(true);
      expect(await verifyProvenance(bytes, ring), p).toMatchObject({ present: true, valid: true, verifiable: true });
    }
    for (const [p, bytes] of before) expect(readFileSync(join(input, p)).equals(bytes), `input ${p} untouched`).toBe(true);
    expect(statSync(join(dataDir, 'signing', 'current.pem')).mode & 0o777).toBe(0o600);
    expect(r.stdout + r.stderr).not.toContain('PRIVATE KEY');
  });

  it('without layers: the opt-out field only, no tag, exit 0; files given directly land under their base name', async () => {
    const input = folder({ 'x.webp': images.get('webp')!, 'y.png': images.get('png')! });
    const out = tempDir();
    const r = await optmark(tempDir(), ['mark', join(input, 'x.webp'), join(input, 'y.png'), '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^done 2, skipped 0, failed 0 \(opt-out field\)$/m);
    expect(tree(out)).toEqual(['x.webp', 'y.png']);
    for (const p of tree(out)) {
      const bytes = readFileSync(join(out, p));
      expect(read(bytes).optedOut).toBe(true);
      expect(bytes.includes(Buffer.from(NS_PROVENANCE))).toBe(false);
    }
  });

  it.each([
    [['mark', 'x'], /--out <dir> is required/],
    [['mark', 'x', '--out', 'o', '--in-place'], /exclude each other/],
    [['mark', '--out', 'o'], /at least one file or folder/],
    [['mark', 'x', '--out', 'o', '--sign'], /unknown option '--sign'/i],
  ])('usage error %j exits 2', async (args, message) => {
    const r = await optmarkHere(args as string[]); // the same program as the binary, in this process
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('never overwrites an input: --out pointing at the input folder fails those files and leaves them as they were', async () => {
    const input = folder({ 'a.png': images.get('png')! });
    const r = await optmark(tempDir(), ['mark', input, '--out', input]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/failed\s+\S*a\.png: output .* is an input/);
    expect(readFileSync(join(input, 'a.png')).equals(images.get('png')!)).toBe(true);
  });

  it('--in-place replaces the inputs, keeping their mode and leaving no temporary files', async () => {
    const input = folder({ 'a.png': images.get('png')!, 'b.jpg': images.get('jpg')! });
    chmodSync(join(input, 'a.png'), 0o640);
    const r = await optmark(tempDir(), ['mark', input, '--in-place']);
    expect(r.status, r.stderr).toBe(0);
    expect(tree(input)).toEqual(['a.png', 'b.jpg']);
    expect(read(readFileSync(join(input, 'a.png'))).optedOut).toBe(true);
    expect(read(readFileSync(join(input, 'b.jpg'))).optedOut).toBe(true);
    expect(statSync(join(input, 'a.png')).mode & 0o777).toBe(0o640);
  });

  it('two inputs that would write the same output: the second fails with the reason; a file listed twice is marked once', async () => {
    const input = folder({ 'a.png': images.get('png')!, a: images.get('png')! });
    const out = tempDir();
    const r = await optmark(tempDir(), ['mark', input, join(input, 'a.png'), '--out', out]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^done 1, skipped 1, failed 1/m);
    expect(r.stdout).toMatch(/would also be written for/);
    expect(r.stdout).toMatch(/skipped\s+\S*a\.png: same file as/);
    expect(tree(out)).toEqual(['a.png']);
  });

  it('a renamed output collides only with an input that writes that name, not with a file that merely exists there', async () => {
    // d/a.jps holds a JPEG: its output is a.jpg. d/a.jpg exists but is not an input of the first run.
    const input = folder({ 'a.jps': images.get('jpg')!, 'a.jpg': images.get('png')!, 'b.jps': images.get('jpg')!, 'b.jpg': images.get('jpg')! });
    const out = tempDir();
    const alone = await optmark(tempDir(), ['mark', join(input, 'a.jps'), '--out', out]);
    expect(alone.stdout).toMatch(/^done 1, skipped 0, failed 0/m);
    expect(alone.status).toBe(0);
    expect(tree(out)).toEqual(['a.jpg']);
    expect(read(readFileSync(join(out, 'a.jpg'))).format).toBe('jpeg');
    // Walking the folder, b.jpg is an input that writes b.jpg: b.jps fails. a.jpg holds a PNG, so it
    // writes a.png and a.jps keeps its a.jpg.
    const whole = tempDir();
    const walked = await optmark(tempDir(), ['mark', input, '--out', whole]);
    expect(walked.status).toBe(1);
    expect(walked.stdout).toMatch(/^done 3, skipped 0, failed 1/m);
    expect(walked.stdout).toMatch(/b\.jps: output \S*b\.jpg would also be written for \S*b\.jpg/);
    expect(tree(whole)).toEqual(['a.jpg', 'a.png', 'b.jpg']);
    // A file argument that writes the name, from another folder, counts as well.
    const other = folder({ 'b.jpg': images.get('jpg')! });
    const mixed = await optmark(tempDir(), ['mark', join(input, 'b.jps'), join(other, 'b.jpg'), '--out', tempDir()]);
    expect(mixed.stdout).toMatch(/^done 1, skipped 0, failed 1/m);
  });

  it('regression: two inputs of one name from different arguments (files or folders) never write over each other', async () => {
    const a = folder({ 'x.jpg': images.get('jpg')!, 'sub/y.png': images.get('png')! });
    const b = folder({ 'x.jpg': images.get('png')!, 'sub/y.png': images.get('png')! });
    // Two file arguments: the first keeps out/x.jpg, the second fails and is not written.
    const out = tempDir();
    const files = await optmark(tempDir(), ['mark', join(a, 'x.jpg'), join(b, 'x.jpg'), '--out', out]);
    expect(files.status).toBe(1);
    expect(files.stdout).toMatch(/^done 1, skipped 0, failed 1/m);
    expect(files.stdout).toMatch(/x\.jpg: output \S*x\.jpg would also be written for \S*x\.jpg/);
    expect(tree(out)).toEqual(['x.jpg']);
    expect(read(readFileSync(join(out, 'x.jpg'))).format).toBe('jpeg');
    // Two folders holding the same names: the second folder's files fail, the first's are kept.
    const both = tempDir();
    const folders = await optmark(tempDir(), ['mark', a, b, '--out', both]);
    expect(folders.status).toBe(1);
    expect(folders.stdout).toMatch(/^done 2, skipped 0, failed 2/m);
    expect(read(readFileSync(join(both, 'x.jpg'))).format).toBe('jpeg');
  });

  it('a missing input is a failure with a reason', async () => {
    const r = await optmark(tempDir(), ['mark', join(tempDir(), 'nope'), '--out', tempDir()]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/failed\s+\S*nope: no such file or folder/);
  });

  it('--fingerprint --provenance: same name and format, fingerprint detected, signature over the final pixels', async () => {
    const dataDir = tempDir();
    const input = folder({ 'p.png': images.get('png')! });
    const out = tempDir();
    const r = await optmark(dataDir, ['mark', input, '--out', out, '--fingerprint', '--provenance']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^done 1, skipped 0, failed 0 \(fingerprint, opt-out field, provenance/m);
    expect(tree(out)).toEqual(['p.png']);
    const bytes = readFileSync(join(out, 'p.png'));
    expect((await sharp(bytes).metadata()).format).toBe('png');
    const secret = await loadFingerprintSecret({ dataDir });
    expect((await detectFingerprint(bytes, secret, { maxPixels: 1e8 })).present).toBe(true);
    expect(await verifyProvenance(bytes, await Keyring.open({ dataDir }))).toMatchObject({ present: true, valid: true, verifiable: true });
    // Marking the output again (re-encoded once more, its old XMP kept by libvips in a text chunk) works too.
    const again = tempDir();
    expect((await optmark(dataDir, ['mark', join(out, 'p.png'), '--out', again, '--fingerprint', '--provenance'])).status).toBe(0);
    expect(await verifyProvenance(readFileSync(join(again, 'p.png')), await Keyring.open({ dataDir }))).toMatchObject({ valid: true });
  });
});

describe('optmark signing-key', () => {
  it('lists, rotates, keeps old public keys, and never prints private keys', async () => {
    const dataDir = tempDir();
    expect((await optmark(dataDir, ['signing-key', 'list'])).stdout).toMatch(/no signing keys yet/);
    const first = await optmark(dataDir, ['signing-key', 'rotate']);
    expect(first.status, first.stderr).toBe(0);
    const firstId = /signing key ([0-9a-f]{16}) is now current/.exec(first.stdout)![1]!;
    const second = await optmark(dataDir, ['signing-key', 'rotate']);
    expect(second.stdout).toContain(`${firstId} and every earlier public key stay`);
    const listed = await optmark(dataDir, ['signing-key', 'list', '--json']);
    const keys = JSON.parse(listed.stdout) as Array<{ keyId: string; current: boolean }>;
    expect(keys).toHaveLength(2);
    expect(keys.find((k) => k.keyId === firstId)?.current).toBe(false);
    for (const r of [first, second, listed]) expect(r.stdout + r.stderr).not.toMatch(/PRIVATE KEY|MC4CAQ/);
  });

  it('refuses to rotate a key configured with OPTMARK_SIGNING_KEY_FILE, and mark reports an unusable key once', async () => {
    const dataDir = tempDir();
    const file = join(dataDir, 'missing.pem');
    const r = await optmark(dataDir, ['signing-key', 'rotate'], { OPTMARK_SIGNING_KEY_FILE: file });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/OPTMARK_SIGNING_KEY_FILE is set/);
    const m = await optmark(dataDir, ['mark', folder({ 'a.png': images.get('png')! }), '--out', tempDir(), '--provenance'], { OPTMARK_SIGNING_KEY_FILE: file });
    expect(m.status).toBe(1);
    expect(m.stderr).toMatch(/^optmark mark: OPTMARK_SIGNING_KEY_FILE .* does not exist\n$/);
  });

  it('regression: a named fingerprint secret or C2PA identity that does not load stops mark and verify once, before any file', async () => {
    const dataDir = tempDir();
    const input = folder({ 'a.png': images.get('png')!, 'b.jpg': images.get('jpg')! });
    const secret = { OPTMARK_DATA_DIR: dataDir, OPTMARK_FINGERPRINT_SECRET_FILE: join(dataDir, 'no-such-secret') };
    // Before: each file failed alone, as "Something went wrong on the server.: ... (internal_error)" for
    // mark and "retry shortly, or send ?fingerprint=skip" (the API's advice) for verify.
    const out = tempDir();
    const m = await optmarkHere(['mark', input, '--out', out, '--fingerprint'], secret);
    expect(m.status).toBe(1);
    expect(m.stderr).toMatch(/^optmark mark: OPTMARK_FINGERPRINT_SECRET_FILE: fingerprint secret file .*no-such-secret does not exist\n$/);
    expect(m.stdout).toBe('');
    expect(tree(out)).toEqual([]);
    const v = await optmarkHere(['verify', input], secret);
    expect(v.status).toBe(1);
    expect(v.stderr).toMatch(
      /^optmark verify: OPTMARK_FINGERPRINT_SECRET_FILE: fingerprint secret file .*no-such-secret does not exist \(--skip-fingerprint verifies the rest without the detector\)\n$/,
    );
    expect(v.stdout).toBe('');
    // Runs that do not use the secret are not stopped by it.
    expect((await optmarkHere(['verify', input, '--skip-fingerprint'], secret)).status).toBe(0);
    expect((await optmarkHere(['mark', input, '--out', tempDir()], secret)).status).toBe(0);

    const c2pa = { OPTMARK_DATA_DIR: dataDir, OPTMARK_C2PA_CERT_FILE: join(dataDir, 'chain.pem'), OPTMARK_C2PA_KEY_FILE: dataDir };
    const c = await optmarkHere(['mark', input, '--out', tempDir()], c2pa);
    expect(c.status).toBe(1);
    expect(c.stderr).toMatch(/^optmark mark: OPTMARK_C2PA_CERT_FILE: .*chain\.pem does not exist\n$/);
    // Set alone, one of the pair is a configuration error of every command (exit 78).
    const alone = await optmarkHere(['mark', input, '--out', tempDir()], { OPTMARK_DATA_DIR: dataDir, OPTMARK_C2PA_KEY_FILE: dataDir });
    expect(alone.status).toBe(78);
    expect(alone.stderr).toBe('optmark: configuration error: OPTMARK_C2PA_KEY_FILE: set, but OPTMARK_C2PA_CERT_FILE is not: set both or neither\n');
  });
});

describe('mark and verify on a PostgreSQL store', () => {
  let db: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("regression: verify detects with the instances' shared fingerprint key, as mark embeds and the servers detect", async () => {
    // Before: verify ignored OPTMARK_DATABASE_URL and detected with the data directory's own fingerprint.key
    // (made on the spot when missing): "fingerprint: not found" for a file mark --fingerprint had just marked.
    const input = folder({ 'a.png': images.get('png')! });
    const out = tempDir();
    const env = (dataDir: string) => ({ OPTMARK_DATA_DIR: dataDir, OPTMARK_DATABASE_URL: db.url });
    const marker = tempDir();
    expect((await optmarkHere(['mark', input, '--out', out, '--fingerprint'], env(marker))).status).toBe(0);
    for (const dataDir of [marker, tempDir()]) {
      const v = await runBinary(['verify', join(out, 'a.png')], { env: env(dataDir) });
      expect(v.status, v.stderr).toBe(0);
      expect(v.stdout).toMatch(/a\.png: opted out \(iptc\.dataMining\); provenance: no tag; fingerprint: found \(confidence [\d.]+\)\n/);
      expect(readFileSync(join(dataDir, 'fingerprint-shared.key'))).toEqual(readFileSync(join(marker, 'fingerprint-shared.key')));
    }
    const down = await optmarkHere(['verify', join(out, 'a.png')], { OPTMARK_DATA_DIR: tempDir(), OPTMARK_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(down.status).toBe(1);
    expect(down.stderr).toMatch(/^optmark verify: .*127\.0\.0\.1:1/);
  });
});

describe('folders that cannot be created', () => {
  it('regression: an --out that cannot be created (under /proc, through a file, a file) fails at once with one line, exit 1', async () => {
    // Before: --out /proc/nc never returned (Node's recursive mkdir takes /proc's ENOENT for a missing
    // parent and tries again forever); a path through a file printed "ENOTDIR: not a directory, mkdir ...".
    const input = folder({ 'a.jpg': images.get('jpg')! });
    const aFile = join(input, 'a.jpg');
    const cases: [string, string][] = [
      ['/proc/optmark-nc', '/proc does not take new folders (mkdir answers ENOENT)'],
      ['/proc/optmark-nc/deeper', '/proc does not take new folders (mkdir answers ENOENT)'],
      [join(aFile, 'x'), 'a part of the path is a file, not a directory'],
      [aFile, 'it is a file, not a directory'],
    ];
    for (const [out, reason] of cases) {
      // The binary: a spin would block this process's event loop if run here.
      const r = await runBinary(['mark', aFile, '--out', out], { env: { OPTMARK_DATA_DIR: tempDir() } });
      expect(r.stderr, out).toBe(`optmark: cannot create the --out folder ${out}: ${reason}\n`);
      expect(r.status).toBe(1);
      expect(r.stdout).toBe('');
    }
    // The data directory and bench load's --out the same way.
    const d = await runBinary(['account', 'list'], { env: { OPTMARK_DATA_DIR: '/proc/optmark-nc' } });
    expect(d.stderr).toBe(
      'optmark: cannot use the data directory /proc/optmark-nc: /proc does not take new folders (mkdir answers ENOENT). Set OPTMARK_DATA_DIR to a directory this user can create and write (default ./data)\n',
    );
    expect(d.status).toBe(1);
    const b = await runBinary(['bench', 'load', '--smoke', '--out', '/proc/optmark-nc'], { env: { OPTMARK_DATA_DIR: tempDir() } });
    expect(b.stderr).toBe('optmark: cannot create /proc/optmark-nc: /proc does not take new folders (mkdir answers ENOENT)\n');
    expect(b.status).toBe(1);
    // What can be created still is, parents included, and an existing folder is used as it is.
    const deep = join(tempDir(), 'x', 'y', 'z');
    for (let i = 0; i < 2; i++) expect((await runBinary(['mark', aFile, '--out', deep], { env: { OPTMARK_DATA_DIR: tempDir() } })).status).toBe(0);
    expect(tree(deep)).toEqual(['a.jpg']);
  });
});

describe("verify's advice when the fingerprint secret cannot be read", () => {
  const input = (): string => folder({ 'a.png': images.get('png')!, 'b.jpg': images.get('jpg')! });

  it("regression: the data directory's own secret stops verify once, naming the file and --skip-fingerprint, never ?fingerprint=skip", async () => {
    // Before: every file failed alone with the API's "retry shortly, or send ?fingerprint=skip".
    const dataDir = tempDir();
    mkdirSync(join(dataDir, 'fingerprint.key')); // a directory where the secret should be
    const v = await optmarkHere(['verify', input()], { OPTMARK_DATA_DIR: dataDir });
    expect(v.status).toBe(1);
    expect(v.stdout).toBe('');
    expect(v.stderr).toBe(
      `optmark verify: cannot read the fingerprint secret ${join(dataDir, 'fingerprint.key')}: it is a directory, not a file (--skip-fingerprint verifies the rest without the detector)\n`,
    );
    const short = tempDir();
    writeFileSync(join(short, 'fingerprint.key'), 'short');
    const s = await optmarkHere(['verify', input()], { OPTMARK_DATA_DIR: short });
    expect(s.status).toBe(1);
    expect(s.stderr).toMatch(/^optmark verify: fingerprint secret file .* is too short \(5 bytes, need at least 16\) \(--skip-fingerprint verifies/);
    const skipped = await optmarkHere(['verify', input(), '--skip-fingerprint'], { OPTMARK_DATA_DIR: dataDir });
    expect(skipped.status).toBe(0);
    expect(skipped.stdout).toMatch(/verified 2: 0 opted out, 2 not/);
  });

  it('a file whose detector cannot run (the secret unreadable after the start) says why and names --skip-fingerprint', async () => {
    const dataDir = tempDir();
    mkdirSync(join(dataDir, 'fingerprint.key'));
    const init = laneInit(loadConfig({ OPTMARK_DATA_DIR: dataDir }));
    const lane = new Lane({
      command: 'verify',
      init,
      provenance: false,
      fingerprint: false,
      hash: true,
      skipExisting: undefined,
      keepTime: false,
      fsync: false,
      skipFingerprint: false,
    });
    await lane.prepare();
    const file = join(input(), 'a.png');
    const o = await lane.run({ input: file, source: file });
    expect(o).toMatchObject({ status: 'failed', code: 'fingerprint_unavailable' });
    expect(o.message).toBe(
      'The fingerprint detector cannot run: its secret cannot be read (is a folder); --skip-fingerprint verifies the rest without the detector.',
    );
    expect(o.message).not.toContain('?fingerprint');
  });
});

describe('a running server and the CLI', () => {
  it('verify in the worker pool sees tags signed after a rotation made while it runs, and the old ones stay valid', async () => {
    const dataDir = tempDir();
    const workers = await testPool(dataDir);
    const verify = async (image: Buffer): Promise<unknown> => {
      // As the server does: the request body goes into a lease of its request memory, the task names it.
      const answer = await workers.request('verify', imageForm(image));
      return (JSON.parse(answer.toString()) as { provenance: unknown }).provenance;
    };
    try {
      await workers.pool.warmUp(); // loads the (empty) keyring before any key exists
      const input = folder({ 'a.jpg': images.get('jpg')! });
      const out1 = tempDir();
      expect((await optmark(dataDir, ['mark', input, '--out', out1, '--provenance'])).status).toBe(0);
      const old = readFileSync(join(out1, 'a.jpg'));
      expect(await verify(old)).toEqual({ present: true, valid: true, verifiable: true });
      expect((await optmark(dataDir, ['signing-key', 'rotate'])).status).toBe(0);
      const out2 = tempDir();
      expect((await optmark(dataDir, ['mark', input, '--out', out2, '--provenance'])).status).toBe(0);
      expect(await verify(readFileSync(join(out2, 'a.jpg')))).toEqual({ present: true, valid: true, verifiable: true });
      expect(await verify(old)).toEqual({ present: true, valid: true, verifiable: true });
      expect(await verify(images.get('jpg')!)).toEqual({ present: false, valid: false, verifiable: false });
    } finally {
      await workers.close();
    }
  });
});
