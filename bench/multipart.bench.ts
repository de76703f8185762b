/**
 * Multipart parsing on the event-loop thread: the 12 MP JPEG upload fed through busboy by
 * MultipartReceiver (as uWS hands it over: ArrayBuffer chunks valid only during the call) into a reused
 * shared destination (as the arena gives it), in realistic and awkward chunk sizes, beside a raw copy of
 * the same chunks into such a destination (the one copy the design allows) and the naive server's
 * busboy + Buffer.concat.
 *
 *   npm run build && node dist/bench/multipart.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import busboy from 'busboy';
import { compare } from './lib/report.js';
import { generatedCorpus, prepare, prng } from './load/corpus.js';
import { MultipartReceiver } from '../src/http/receive.js';

const [img] = await generatedCorpus(['jpeg-12mp']);
const req = prepare('protect', img!);
const body = req.body;

/** The body cut into standalone ArrayBuffers of the given sizes (cycled). */
function chunks(sizes: (i: number) => number): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (let at = 0, i = 0; at < body.length; i++) {
    const n = Math.min(sizes(i), body.length - at);
    out.push(body.buffer.slice(body.byteOffset + at, body.byteOffset + at + n) as ArrayBuffer);
    at += n;
  }
  return out;
}

const rand = prng(3);
const randomSizes = Array.from({ length: 4096 }, () => 1 + Math.floor(rand() * 131072));
const patterns: Array<[string, ArrayBuffer[]]> = [
  ['512 KiB chunks', chunks(() => 512 * 1024)],
  ['64 KiB chunks', chunks(() => 65536)],
  ['16 KiB + 1 chunks', chunks(() => 16385)],
  ['1031-byte chunks', chunks(() => 1031)],
  ['random 1..128 KiB chunks', chunks((i) => randomSizes[i % randomSizes.length]!)],
];

/** Reused like an arena range: the receiver writes into it, it is never reallocated per upload. */
const destination = new Uint8Array(new SharedArrayBuffer(body.length));

async function receive(parts: ArrayBuffer[]): Promise<number> {
  const rx = new MultipartReceiver({ contentType: req.contentType, destination, maxImageBytes: 26_214_400 });
  for (let i = 0; i < parts.length; i++) rx.push(parts[i]!, i === parts.length - 1);
  const got = await rx.done;
  if (got.bytes.length !== img!.bytes.length) throw new Error(`received ${got.bytes.length} bytes, sent ${img!.bytes.length}`);
  return got.bytes.length;
}

/** The floor: the same chunks copied into the same kind of reused shared destination, nothing parsed. */
const copyDestination = new Uint8Array(new SharedArrayBuffer(body.length));

function rawCopy(parts: ArrayBuffer[]): number {
  let at = 0;
  for (const p of parts) {
    copyDestination.set(new Uint8Array(p), at);
    at += p.byteLength;
  }
  return at;
}

function naiveConcat(parts: ArrayBuffer[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const bb = busboy({ headers: { 'content-type': req.contentType } });
    const got: Buffer[] = [];
    bb.on('file', (_n, f) => f.on('data', (c: Buffer) => got.push(c)));
    bb.on('close', () => resolve(Buffer.concat(got).length));
    bb.on('error', reject);
    // node:http hands the naive server Buffers it owns: copy out of the ArrayBuffer as it would.
    for (const p of parts) bb.write(Buffer.from(new Uint8Array(p)));
    bb.end();
  });
}

console.log(`upload: ${img!.name}, ${(body.length / 1e6).toFixed(2)} MB multipart body`);
const [, p64] = patterns[1]!;
await compare(
  'multipart receive, 12 MP JPEG, 64 KiB chunks',
  { name: 'raw copy of the chunks (floor)', fn: () => rawCopy(p64) },
  [
    { name: 'MultipartReceiver (busboy)', fn: () => receive(p64) },
    { name: 'naive: busboy + Buffer.concat', fn: () => naiveConcat(p64) },
  ],
);
await compare(
  'MultipartReceiver across chunk sizes, 12 MP JPEG',
  { name: `raw copy, ${patterns[1]![0]}`, fn: () => rawCopy(p64) },
  patterns.map(([name, parts]) => ({ name: `receiver, ${name} (${parts.length})`, fn: () => receive(parts) })),
  { note: 'Awkward sizes put boundary and header bytes across chunk edges; the cost per chunk shows in the small sizes.' },
);
