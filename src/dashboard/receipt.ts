/**
 * The PDF receipt of one dashboard batch (pdfkit, with the PDF standard fonts, so nothing is embedded
 * or fetched): who marked what and when, each file's SHA-256, the signal written, the layers and the
 * provenance key id. A few KiB for 25 files.
 */
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
  const layers = [batch.fingerprint ? 'fingerprint' : '', batch.provenance ? 'provenance' : ''].filter(Boolean);
  const keyIds = [...new Set(records.map((r) => r.provenanceKeyId).filter((k): k is string => !!k))];

  doc.font('Helvetica-Bold').fontSize(18).text('optmark receipt');
  doc.moveDown(0.3).font('Helvetica').fontSize(10).fillColor('#333333');
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
  for (const [k, v] of facts) doc.font('Helvetica-Bold').text(`${k}: `, { continued: true }).font('Helvetica').text(v);
  doc.moveDown();
  records.forEach((r, i) => {
    if (doc.y > doc.page.height - 140) doc.addPage();
    doc
      .fillColor('#000000')
      .font('Helvetica-Bold')
      .fontSize(11)
      .text(`${i + 1}. ${r.originalName}`);
    doc.font('Helvetica').fontSize(9).fillColor('#333333');
    doc.text(`Produced: ${r.producedName} (${r.mimeType}, ${r.bytes} bytes)`);
    doc.text(`Marked: ${r.markedAt}   Layers: ${r.layers.length ? r.layers.join(', ') : 'none'}   Signal: iptc.dataMining`);
    if (r.provenanceKeyId) doc.text(`Provenance key id: ${r.provenanceKeyId}`);
    doc.font('Courier').fontSize(8.5).text(`SHA-256 ${r.sha256}`);
    doc.moveDown(0.6);
  });
  doc.moveDown();
  doc
    .font('Helvetica')
    .fontSize(8)
    .fillColor('#333333')
    .text(
      'The opt-out field records a rights reservation; it does not guarantee that AI systems comply. A provenance tag proves that ' +
        'this server signed these bytes with this opt-out value, not authorship. The fingerprint is an experimental statistical mark.',
    );
  doc.end();
  return done;
}
