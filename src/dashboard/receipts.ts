/**
 * Receipts off the event loop: a one-thread piscina pool running workers/receipt-worker.ts. The thread
 * starts with the first receipt and ends after a minute without one, so a server whose dashboard makes no
 * receipts keeps no thread for it. A receipt is small and bounded (one page per ~7 files of a batch of at
 * most 25), yet embedding and subsetting the font takes tens to hundreds of milliseconds of CPU: too much
 * for the thread that answers every request.
 */
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { OptmarkError } from '../errors.js';
import type { ReceiptInput } from './receipt.js';

const WORKER = fileURLToPath(new URL('../../workers/receipt-worker.js', import.meta.url));

export interface ReceiptMakerOptions {
  /** Receipts waiting for the thread at most; past it, 503 overloaded. */
  maxQueue?: number;
  /** A receipt not made in this time fails (its thread is replaced). */
  timeoutMs?: number;
}

export class ReceiptMaker {
  readonly #pool: Piscina<ReceiptInput, Uint8Array>;
  readonly #timeoutMs: number;

  constructor(options: ReceiptMakerOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#pool = new Piscina<ReceiptInput, Uint8Array>({
      filename: WORKER,
      minThreads: 0,
      maxThreads: 1,
      idleTimeout: 60_000,
      maxQueue: options.maxQueue ?? 32,
    });
  }

  /** The PDF bytes of one batch's receipt. */
  async make(input: ReceiptInput): Promise<Buffer> {
    let bytes: Uint8Array;
    try {
      bytes = await this.#pool.run(input, { signal: AbortSignal.timeout(this.#timeoutMs) });
    } catch (err) {
      const name = (err as { name?: unknown })?.name;
      if (name === 'AbortError' || name === 'TimeoutError') throw new OptmarkError('processing_timeout', 'Making the receipt took too long; try again.');
      if (/queue is at limit/i.test(String((err as Error)?.message)))
        throw new OptmarkError('overloaded', 'Too many receipts are being made; try again shortly.');
      throw err;
    }
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async close(): Promise<void> {
    await this.#pool.close({ force: true });
  }
}
