/**
 * The receipt worker (piscina, one thread, started on the first receipt and let go when idle): builds a
 * batch's PDF receipt (src/dashboard/receipt.ts) off the server's event loop and moves the bytes back.
 */
import { Piscina } from 'piscina';
import { buildReceipt, type ReceiptInput } from '../src/dashboard/receipt.js';

export default async function receipt(input: ReceiptInput): Promise<Uint8Array> {
  const pdf = await buildReceipt(input);
  // A view of its own ArrayBuffer, so the bytes are transferred, not copied.
  const own = pdf.byteOffset === 0 && pdf.byteLength === pdf.buffer.byteLength ? new Uint8Array(pdf.buffer) : new Uint8Array(pdf);
  return Piscina.move(own) as unknown as Uint8Array;
}
