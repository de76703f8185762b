/**
 * Two builds of optmark side by side on the figure a server's user sees: the server's CPU per request
 * (user + system time of the whole server process, all its threads, from /proc) for protect and for
 * verify?fingerprint=skip, per input, with batches of requests alternating between the two servers so
 * both see the same machine. For a fast path that shadows a plain one: build the tree with it (A) and
 * without it (B) into two folders, then
 *
 *   node A/dist/bench/side-by-side.bench.js A/dist/src/cli.js B/dist/src/cli.js [rounds] [per-batch]
 *
 * It prints, per input and request, each server's CPU per request (median over rounds) and the B/A
 * ratio round by round (min, median, max): a ratio above 1 is what A's path saves.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { cpuMs, freePort } from './lib/proc.js';

const [cliA, cliB] = [process.argv[2], process.argv[3]].map((p) => resolve(p ?? ''));
const ROUNDS = Number(process.argv[4] ?? 6);
const PER_BATCH = Number(process.argv[5] ?? 100);

interface Server {
  name: string;
  port: number;
  key: string;
  process: ChildProcess;
  dataDir: string;
}

async function start(name: string, cli: string): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'optmark-sbs-'));
  const port = await freePort();
  const child = spawn(process.execPath, [cli, 'serve'], {
    env: {
      PATH: process.env.PATH,
      OPTMARK_HOST: '127.0.0.1',
      OPTMARK_PORT: String(port),
      OPTMARK_DATA_DIR: dataDir,
      OPTMARK_POOL_SIZE: '1',
      OPTMARK_LOG_LEVEL: 'warn',
      OPTMARK_FINGERPRINT_DETECT: 'off',
      OPTMARK_DEFAULT_PROTECT_LIMIT: String(2 ** 31),
      OPTMARK_DEFAULT_VERIFY_LIMIT: String(2 ** 31),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let key: string | undefined;
  for (let i = 0; i < 600 && !key; i++) {
    await new Promise((r) => setTimeout(r, 100));
    try {
      key = /(om_live_[0-9A-Za-z]{43})/.exec(readFileSync(join(dataDir, 'bootstrap-key.txt'), 'utf8'))?.[1];
    } catch {}
  }
  if (!key) throw new Error(`${name}: the server did not write its start-up key`);
  for (let i = 0; i < 600; i++) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, port, key, process: child, dataDir };
}

const BOUNDARY = 'optmark-bench-boundary';

function form(image: Buffer, type: string): Buffer {
  return Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="photo"\r\nContent-Type: ${type}\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

/** One request, sent again after a 503 (a loaded machine's worker queue was full; the answer is what counts). */
async function post(server: Server, path: string, body: Buffer): Promise<Buffer> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await postOnce(server, path, body);
    } catch (err) {
      if (!(err as Error).message.endsWith(': 503') || attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function postOnce(server: Server, path: string, body: Buffer): Promise<Buffer> {
  return new Promise((ok, fail) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        method: 'POST',
        path,
        headers: { Authorization: `Bearer ${server.key}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 ? ok(Buffer.concat(chunks)) : fail(new Error(`${server.name} ${path}: ${res.statusCode}`))));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** Photograph-like noise at a size, as a camera or phone file compresses. */
async function photo(width: number, height: number, format: 'jpeg' | 'png' | 'webp'): Promise<Buffer> {
  const img = sharp({ create: { width, height, channels: 3, background: '#6a7b8c', noise: { type: 'gaussian', mean: 0, sigma: 30 } } });
  return (format === 'jpeg' ? img.jpeg({ quality: 85 }) : format === 'png' ? img.png() : img.webp({ quality: 80 })).toBuffer();
}

const median = (v: number[]): number => [...v].sort((x, y) => x - y)[v.length >> 1]!;

/**
 * The same photo carrying another tool's XMP (a few properties and a per-file id and date), in `n`
 * variants: a real server rarely sees the same packet twice.
 */
async function withForeignXmp(n: number): Promise<Buffer[]> {
  const base = await photo(640, 480, 'jpeg');
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const xmp =
      '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">' +
      '<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:xmpMM="http://ns.adobe.com/xap/1.0/mm/" xmlns:dc="http://purl.org/dc/elements/1.1/"' +
      ` xmp:CreatorTool="Camera 1.0" xmp:CreateDate="2024-05-${String((i % 28) + 1).padStart(2, '0')}T10:00:${String(i % 60).padStart(2, '0')}"` +
      ` xmpMM:DocumentID="xmp.did:${i.toString(16).padStart(32, '0')}"><dc:creator><rdf:Seq><rdf:li>A. Photographer</rdf:li></rdf:Seq></dc:creator>` +
      '<dc:rights><rdf:Alt><rdf:li xml:lang="x-default">All rights reserved</rdf:li></rdf:Alt></dc:rights></rdf:Description></rdf:RDF></x:xmpmeta>';
    out.push(await sharp(base).withXmp(xmp).jpeg({ quality: 85 }).toBuffer());
  }
  return out;
}

const foreign = await withForeignXmp(PER_BATCH);

const inputs: Array<{ label: string; type: string; bytes: Buffer; variants?: Buffer[] }> = [
  { label: 'JPEG 0.3 MP, another XMP per request', type: 'image/jpeg', bytes: foreign[0]!, variants: foreign },
  { label: 'JPEG 0.3 MP, no XMP', type: 'image/jpeg', bytes: await photo(640, 480, 'jpeg') },
  { label: 'JPEG 2 MP, no XMP', type: 'image/jpeg', bytes: await photo(1600, 1200, 'jpeg') },
  { label: 'PNG 0.3 MP, no XMP', type: 'image/png', bytes: await photo(640, 480, 'png') },
  { label: 'WebP 0.3 MP, no XMP', type: 'image/webp', bytes: await photo(640, 480, 'webp') },
];

const servers = [await start('A', cliA!), await start('B', cliB!)];
try {
  // The marked files (the fresh packet in them) are what verify is asked about.
  const protectOne = async (image: Buffer, type: string): Promise<Buffer> =>
    Buffer.from((JSON.parse((await post(servers[0]!, '/api/v1/protect', form(image, type))).toString()) as { imageBase64: string }).imageBase64, 'base64');
  const cases: Array<{ label: string; path: string; bodies: Buffer[] }> = [];
  for (const input of inputs) {
    const images = input.variants ?? [input.bytes];
    const marked: Buffer[] = [];
    for (const b of images) marked.push(await protectOne(b, input.type));
    cases.push(
      { label: `protect ${input.label} (${input.bytes.length} B)`, path: '/api/v1/protect', bodies: images.map((b) => form(b, input.type)) },
      { label: `verify?fingerprint=skip, marked ${input.label}`, path: '/api/v1/verify?fingerprint=skip', bodies: marked.map((b) => form(b, input.type)) },
    );
  }
  console.log(`A ${cliA}\nB ${cliB}\n${ROUNDS} rounds; per round and case, ${PER_BATCH} requests to each server in turn (which goes first alternates)`);
  for (const c of cases) {
    for (const s of servers) for (let i = 0; i < 5; i++) await post(s, c.path, c.bodies[i % c.bodies.length]!); // warm
    const per: Record<string, number[]> = { A: [], B: [] };
    const ratios: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? servers : [...servers].reverse();
      const got: Record<string, number> = {};
      for (const s of order) {
        const before = cpuMs(s.process.pid!);
        for (let i = 0; i < PER_BATCH; i++) await post(s, c.path, c.bodies[i % c.bodies.length]!);
        got[s.name] = (cpuMs(s.process.pid!) - before) / PER_BATCH;
        per[s.name]!.push(got[s.name]!);
      }
      ratios.push(got.B! / got.A!);
    }
    const sorted = [...ratios].sort((x, y) => x - y);
    console.log(
      `${c.label}: A ${median(per.A!).toFixed(3)} ms, B ${median(per.B!).toFixed(3)} ms CPU per request; B/A min ${sorted[0]!.toFixed(2)}, median ${median(ratios).toFixed(2)}, max ${sorted.at(-1)!.toFixed(2)}`,
    );
  }
} finally {
  for (const s of servers) {
    s.process.kill('SIGTERM');
    await new Promise((r) => s.process.once('exit', r));
    rmSync(s.dataDir, { recursive: true, force: true });
  }
}
