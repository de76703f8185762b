/**
 * The PDF receipt of one dashboard batch (pdfkit): who marked what and when, each file's SHA-256, the
 * signal written, the layers and the provenance key id. Text is set in DejaVu Sans, embedded (subset) from
 * the dejavu-fonts-ttf package, so file names in Latin, Greek, Cyrillic and the other scripts it covers
 * print as they are; a character the font lacks (Japanese, emoji) prints as its code point, <U+5199>,
 * never as a wrong glyph. Hex digests stay in the standard Courier. A few tens of KiB for 25 files.
 *
 * This runs on the receipt worker (workers/receipt-worker.ts, through ./receipts.ts), not on the
 * server's event loop: parsing and subsetting the font takes tens of milliseconds.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { create as openFont } from 'fontkit';
import PDFDocument from 'pdfkit';
import type { Batch, MarkRecord } from '../store/index.js';

export interface ReceiptInput {
  batch: Batch;
  records: MarkRecord[];
  account: string;
  /** The server that marked the images (its Host), for the reader. */
  issuer: string;
  now: Date;
}

interface Face {
  bytes: Buffer;
  /** The code points the face has a glyph for. */
  covers: Set<number>;
}

let faces: { regular: Face; bold: Face } | undefined;

/** The two DejaVu Sans faces, read and indexed once per thread. */
function loadFaces(): { regular: Face; bold: Face } {
  if (!faces) {
    const require = createRequire(import.meta.url);
    const face = (file: string): Face => {
      const bytes = readFileSync(require.resolve(`dejavu-fonts-ttf/ttf/${file}`));
      return { bytes, covers: new Set(openFont(bytes).characterSet) };
    };
    faces = { regular: face('DejaVuSans.ttf'), bold: face('DejaVuSans-Bold.ttf') };
  }
  return faces;
}

/**
 * `text` with every character the face cannot draw (and every control character) written as its code
 * point, <U+XXXX>, so the receipt never shows a blank or a wrong glyph for a name.
 */
export function printable(text: string, face: Face): string {
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const control = cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
    out += !control && face.covers.has(cp) ? ch : `<U+${cp.toString(16).toUpperCase().padStart(4, '0')}>`;
  }
  return out;
}

const SIGNAL = 'iptc.dataMining = DMI-PROHIBITED-AIMLTRAINING';

/** Builds the receipt; resolves with the PDF bytes. */
export function buildReceipt(input: ReceiptInput): Promise<Buffer> {
  const { batch, records, account, issuer, now } = input;
  const doc = new PDFDocument({
    size: 'A4',
    margin: 50,
    info: { Title: `optmark receipt ${batch.id}`, Author: 'optmark', Subject: 'Images marked with the IPTC/PLUS AI-training opt-out', CreationDate: now },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });
  const { regular, bold } = loadFaces();
  doc.registerFont('body', regular.bytes);
  doc.registerFont('bold', bold.bytes);
  const text = (t: string) => printable(t, regular);
  const strong = (t: string) => printable(t, bold);
  // In the order the layer path applies them (src/signals/layers.ts).
  const layers = [
    batch.fingerprint ? 'fingerprint' : '',
    batch.tdmrep ? 'tdmrep' : '',
    batch.provenance ? 'provenance' : '',
    batch.contentCredentials ? 'content-credentials' : '',
  ].filter(Boolean);
  const keyIds = [...new Set(records.map((r) => r.provenanceKeyId).filter((k): k is string => !!k))];

  doc.font('bold').fontSize(18).text('optmark receipt');
  doc.moveDown(0.3).font('body').fontSize(10).fillColor('#333333');
  const facts: Array<[string, string]> = [
    ['Batch', batch.id],
    ['Account', account],
    ['API key', `${batch.keyPrefix}…`],
    ['Opened', batch.createdAt],
    ['Receipt made', now.toISOString()],
    ['Server', issuer],
    ['Signal written', SIGNAL],
    ['Layers', layers.length ? layers.join(', ') : 'none (opt-out field only)'],
    ['Provenance key id', keyIds.length ? keyIds.join(', ') : '-'],
    ['Files', `${records.length} marked`],
  ];
  for (const [k, v] of facts) doc.font('bold').text(`${k}: `, { continued: true }).font('body').text(text(v));
  doc.moveDown();
  records.forEach((r, i) => {
    if (doc.y > doc.page.height - 140) doc.addPage();
    doc
      .fillColor('#000000')
      .font('bold')
      .fontSize(11)
      .text(`${i + 1}. ${strong(r.originalName)}`);
    doc.font('body').fontSize(9).fillColor('#333333');
    doc.text(`Produced: ${text(r.producedName)} (${text(r.mimeType)}, ${r.bytes} bytes)`);
    doc.text(`Marked: ${text(r.markedAt)}   Layers: ${r.layers.length ? text(r.layers.join(', ')) : 'none'}   Signal: iptc.dataMining`);
    if (r.provenanceKeyId) doc.text(`Provenance key id: ${text(r.provenanceKeyId)}`);
    doc.font('Courier').fontSize(8.5).text(`SHA-256 ${r.sha256}`);
    doc.moveDown(0.6);
  });
  doc.moveDown();
  doc
    .font('body')
    .fontSize(8)
    .fillColor('#333333')
    .text(
      'The opt-out field records a rights reservation; it does not guarantee that AI systems comply. A provenance tag proves that ' +
        'this server signed these bytes with this opt-out value, not authorship. The fingerprint is an experimental statistical mark.',
    );
  doc.end();
  return done;
}
