// The PDF receipt's text as a reader extracts it (PDF.js, test/helpers/pdf.ts): file names in Greek, Cyrillic and
// accented Latin come back exactly (the embedded DejaVu Sans, not the Latin-1 standard fonts); a character
// the font lacks comes back as its code point, never as a wrong character; and the receipt made on its
// worker thread (dist/, as the server runs it) is the same document.
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ReceiptMaker } from '../dist/src/dashboard/receipts.js';
import { buildReceipt, type ReceiptInput } from '../src/dashboard/receipt.js';
import type { MarkRecord } from '../src/store/index.js';
import { pdfText } from './helpers/pdf.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

const NAMES = ['Ωραία φωτογραφία.jpg', 'Фото_Москва-2026.png', 'Zürich Ærø Łódź.webp', 'photo.jpg', '写真 2026.jpg', 'tab\there.jpg'];

function input(names: string[]): ReceiptInput {
  const batchId = '6f9c2a51-0d2e-4a43-9d4e-3c1b2a0f9e11';
  const records: MarkRecord[] = names.map((name, i) => ({
    id: `rec-${i}`,
    batchId,
    sha256: sha(name),
    originalName: name,
    producedName: name.replace(/[^\x20-\x7e]/g, '_'),
    mimeType: 'image/jpeg',
    bytes: 1000 + i,
    layers: ['fingerprint', 'provenance'],
    keyPrefix: 'om_live_ABCDEFGH',
    provenanceKeyId: '0123456789abcdef',
    markedAt: `2026-11-24T10:00:${String(i % 60).padStart(2, '0')}.000Z`,
  }));
  return {
    batch: {
      id: batchId,
      size: 25,
      provenance: true,
      fingerprint: true,
      used: names.length,
      keyPrefix: 'om_live_ABCDEFGH',
      createdAt: '2026-11-24T09:59:00.000Z',
    },
    records,
    account: 'Фотоателье «Север»',
    issuer: 'optmark.example',
    now: new Date('2026-11-24T10:05:00.000Z'),
  };
}

let maker: ReceiptMaker | undefined;
afterAll(async () => {
  await maker?.close();
});

describe('the PDF receipt', () => {
  it('prints Greek, Cyrillic and accented Latin names as they are, and code points for what the font lacks', async () => {
    const text = await pdfText(await buildReceipt(input(NAMES)));
    for (const name of NAMES.slice(0, 4)) expect(text).toContain(name);
    expect(text).toContain('Account: Фотоателье «Север»');
    // No Japanese glyphs in DejaVu Sans: the code points, not blanks or wrong characters.
    expect(text).toContain('<U+5199><U+771F> 2026.jpg');
    // A control character is never drawn.
    expect(text).toContain('tab<U+0009>here.jpg');
    for (const name of NAMES) expect(text).toContain(`SHA-256 ${sha(name)}`);
  });

  it('a full batch of 25 from the worker thread reads the same as one built here', async () => {
    const names = Array.from({ length: 25 }, (_, i) => `${NAMES[i % 4]!.replace(/(\.\w+)$/, `-${i}$1`)}`);
    maker = new ReceiptMaker();
    const [fromWorker, local] = await Promise.all([maker.make(input(names)), buildReceipt(input(names))]);
    expect(fromWorker.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    const text = await pdfText(fromWorker);
    for (const name of names) expect(text).toContain(name);
    // Same content (the documents differ only in their random ID).
    expect(text).toBe(await pdfText(local));
  });
});
