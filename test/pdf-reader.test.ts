// The tests read PDFs with a library from npm (PDF.js, test/helpers/pdf.ts), not with a system tool that a
// fresh machine lacks (poppler's pdftotext): here every way of starting a process throws, PATH is empty,
// and the receipt's text must still come back whole.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildReceipt } from '../src/dashboard/receipt.js';
import { pdfText } from './helpers/pdf.js';

vi.mock('node:child_process', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:child_process')>();
  const refuse = (): never => {
    throw new Error('the PDF reader started a process: tests must not need a system tool (pdftotext) to read a PDF');
  };
  return { ...real, default: real, exec: refuse, execFile: refuse, execFileSync: refuse, execSync: refuse, fork: refuse, spawn: refuse, spawnSync: refuse };
});

const PATH = process.env.PATH;
afterEach(() => {
  process.env.PATH = PATH;
});

describe('reading a PDF in the tests', () => {
  it('needs no process and no program on PATH', async () => {
    const name = 'Портрет πορτρέτο.jpg';
    const sha256 = createHash('sha256').update(name).digest('hex');
    const pdf = await buildReceipt({
      batch: { id: 'b-1', size: 25, provenance: true, fingerprint: false, used: 1, keyPrefix: 'om_live_ABCDEFGH', createdAt: '2026-01-01T00:00:00.000Z' },
      records: [
        {
          id: 'r-1',
          batchId: 'b-1',
          sha256,
          originalName: name,
          producedName: 'portrait.jpg',
          mimeType: 'image/jpeg',
          bytes: 1234,
          layers: ['provenance'],
          keyPrefix: 'om_live_ABCDEFGH',
          provenanceKeyId: '0123456789abcdef',
          markedAt: '2026-01-01T00:00:01.000Z',
        },
      ],
      account: 'Studio',
      issuer: 'optmark.example',
      now: new Date('2026-01-01T00:05:00.000Z'),
    });
    process.env.PATH = '';
    const text = await pdfText(pdf);
    expect(text.split('\n')).toContain(`SHA-256 ${sha256}`);
    expect(text).toContain(`1. ${name}`);
    expect(text).toContain('Account: Studio');
  });
});
