/**
 * What a 25-file PDF receipt costs the server's event loop, side by side in one run: (a) built on the
 * event loop itself (buildReceipt called in this thread) and (b) made by the receipt worker (ReceiptMaker,
 * as the server does it). For each receipt, the longest stretch the event loop could not run a 1 ms timer
 * and the receipt's wall time; rounds alternate the two. Printed: the medians
 * and the ratio of the blocks.
 *
 *   npm run build && node dist/bench/receipt.bench.js [--rounds 7]
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { median as upperMedian } from './load/report.js';
import { buildReceipt, type ReceiptInput } from '../src/dashboard/receipt.js';
import { ReceiptMaker } from '../src/dashboard/receipts.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: process.env.BENCH_QUICK ? '3' : '7' } } });
const rounds = Number(values.rounds);
if (!(rounds >= 1)) throw new Error('--rounds >= 1');

const NAMES = ['Ωραία φωτογραφία', 'Фото Москва', 'Zürich Ærø', 'holiday photo', '写真'];

function input(): ReceiptInput {
  const batchId = '6f9c2a51-0d2e-4a43-9d4e-3c1b2a0f9e11';
  const now = new Date();
  return {
    batch: {
      id: batchId,
      size: 25,
      provenance: true,
      fingerprint: true,
      tdmrep: false,
      contentCredentials: false,
      used: 25,
      keyPrefix: 'om_live_ABCDEFGH',
      createdAt: now.toISOString(),
    },
    records: Array.from({ length: 25 }, (_, i) => {
      const name = `${NAMES[i % NAMES.length]} ${i}.jpg`;
      return {
        id: `rec-${i}`,
        batchId,
        sha256: createHash('sha256').update(name).digest('hex'),
        originalName: name,
        producedName: name,
        mimeType: 'image/jpeg',
        bytes: 3_000_000 + i,
        layers: ['fingerprint', 'provenance'],
        keyPrefix: 'om_live_ABCDEFGH',
        provenanceKeyId: '0123456789abcdef',
        markedAt: now.toISOString(),
      };
    }),
    account: 'bench',
    issuer: 'localhost',
    now,
  };
}

/**
 * The receipt's wall time and the longest event-loop block while it was made, in ms: a 1 ms interval
 * timer notes the longest gap between two of its ticks, from a tick before the work to one after it
 * (so a block is counted whole, whenever it falls).
 */
async function measure(make: () => Promise<Buffer>): Promise<{ wall: number; block: number; bytes: number }> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  await new Promise((r) => setTimeout(r, 20));
  longest = 0;
  const t0 = performance.now();
  const pdf = await make();
  const wall = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 20));
  clearInterval(timer);
  return { wall, block: longest, bytes: pdf.length };
}

async function main(): Promise<void> {
  const maker = new ReceiptMaker();
  try {
    const modes = {
      'event loop': () => buildReceipt(input()),
      worker: () => maker.make(input()),
    };
    // Warm both (font parsing, the worker's start).
    for (const make of Object.values(modes)) await make();
    const results: Record<string, { wall: number[]; block: number[] }> = { 'event loop': { wall: [], block: [] }, worker: { wall: [], block: [] } };
    let bytes = 0;
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? (['event loop', 'worker'] as const) : (['worker', 'event loop'] as const);
      for (const mode of order) {
        const m = await measure(modes[mode]);
        bytes = m.bytes;
        results[mode]!.wall.push(m.wall);
        results[mode]!.block.push(m.block);
        console.log(`round ${r + 1} ${mode.padEnd(10)} receipt ${m.wall.toFixed(1)} ms, longest event-loop block ${m.block.toFixed(1)} ms`);
      }
    }
    const med = (xs: number[]) => upperMedian(xs)!;
    const inline = results['event loop']!;
    const worker = results.worker!;
    console.log(`25-file receipt, ${(bytes / 1024).toFixed(1)} KiB, medians of ${rounds} rounds:`);
    console.log(`  event loop: receipt ${med(inline.wall).toFixed(1)} ms, longest block ${med(inline.block).toFixed(1)} ms`);
    console.log(`  worker:     receipt ${med(worker.wall).toFixed(1)} ms, longest block ${med(worker.block).toFixed(1)} ms`);
    console.log(`  block worker / event loop = ${(med(worker.block) / med(inline.block)).toFixed(3)}`);
  } finally {
    await maker.close();
  }
}

await main();
