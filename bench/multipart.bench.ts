/**
 * Receiving and parsing a 12 MP JPEG upload. On the event-loop thread: a transfer lease (what optmark
 * does there: copy uWS's ArrayBuffer chunks, valid only during the call, into the request memory) beside busboy run there chunk by chunk (MultipartReceiver, as optmark did before)
 * and the naive server's busboy + Buffer.concat, against a raw copy of the same chunks. In a worker:
 * parseUpload, busboy over the whole body in place, against one copy of the body.
 *
 *   npm run build && node dist/bench/multipart.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import busboy from 'busboy';
import { compare } from './lib/report.js';
import { generatedCorpus, prepare, prng } from './load/corpus.js';
import { MultipartReceiver, parseUpload } from '../src/pipeline/upload.js';
import { Transfer } from '../src/transfer/index.js';

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

/** Reused like request memory: chunk-by-chunk receivers write into it, it is never reallocated per upload. */
const destination = new Uint8Array(new SharedArrayBuffer(body.length));

/** The server's request memory, as optmark sizes it for one upload. */
const transfer = new Transfer({ capacityBytes: 4 * body.length, warmBytes: 4 * body.length });

/** What the event-loop thread does now: the chunks copied into a lease, nothing parsed. */
async function receiveBody(parts: ArrayBuffer[]): Promise<number> {
  const lease = transfer.admit(body.length, false)!;
  for (const p of parts) if (!lease.write(p)) throw new Error('the lease refused a chunk');
  const got = lease.seal().input.length;
  lease.release();
  if (got !== body.length) throw new Error(`received ${got} bytes, sent ${body.length}`);
  return got;
}

/** The worker's part: the body already in shared memory, parsed in place. */
const inArena = new Uint8Array(new SharedArrayBuffer(body.length));
Buffer.from(inArena.buffer).fill(body);
async function parseInPlace(): Promise<number> {
  const got = await parseUpload(inArena, req.contentType, 26_214_400);
  if (got.bytes.length !== img!.bytes.length || got.bytes.buffer !== inArena.buffer) throw new Error('parseUpload did not find the image in place');
  return got.bytes.length;
}
{
  const got = await parseUpload(inArena, req.contentType, 26_214_400);
  if (!Buffer.from(got.bytes.buffer, got.bytes.byteOffset, got.bytes.length).equals(img!.bytes)) throw new Error('parseUpload: bytes differ');
}
const bodyCopy = new Uint8Array(new SharedArrayBuffer(body.length));

/** busboy on the event loop, chunk by chunk (optmark before the parse moved to the workers). */
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
  const dest = Buffer.from(copyDestination.buffer);
  let at = 0;
  for (const p of parts) {
    // Buffer#fill is memcpy; TypedArray#set into shared memory is V8's byte-wise relaxed memmove.
    dest.fill(new Uint8Array(p), at, at + p.byteLength);
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
await compare('event-loop thread: 12 MP JPEG upload in 64 KiB chunks', { name: 'raw copy of the chunks (floor)', fn: () => rawCopy(p64) }, [
  { name: 'transfer lease (optmark: copy only)', fn: () => receiveBody(p64) },
  { name: 'MultipartReceiver (busboy there)', fn: () => receive(p64) },
  { name: 'naive: busboy + Buffer.concat', fn: () => naiveConcat(p64) },
]);
await compare(
  'worker: the multipart framing of the received body',
  { name: 'one copy of the body (floor)', fn: () => Buffer.from(bodyCopy.buffer).fill(body).length },
  [{ name: 'parseUpload (busboy, in place)', fn: () => parseInPlace() }],
  { note: 'The worker pays this in parallel with the other workers; the event-loop thread no longer does.' },
);
await compare(
  'a transfer lease across chunk sizes, 12 MP JPEG',
  { name: `raw copy, ${patterns[1]![0]}`, fn: () => rawCopy(p64) },
  patterns.map(([name, parts]) => ({ name: `lease, ${name} (${parts.length})`, fn: () => receiveBody(parts) })),
  { note: 'The cost per chunk shows in the small sizes.' },
);
