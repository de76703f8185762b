// The text of a PDF as a reader gets it: poppler's pdftotext (Debian's poppler-utils, which .ci/run
// installs), an extractor independent of the pdfkit that wrote the file. It decodes the embedded font's
// ToUnicode map, so what comes back is what a person copying from the receipt would get.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PDFTOTEXT = '/usr/bin/pdftotext';

export function pdfText(pdf: Buffer): string {
  if (!existsSync(PDFTOTEXT)) throw new Error(`${PDFTOTEXT} is missing: apt-get install poppler-utils (.ci/run does)`);
  return execFileSync(PDFTOTEXT, ['-enc', 'UTF-8', '-', '-'], { input: pdf, encoding: 'utf8', maxBuffer: 16 << 20 });
}
