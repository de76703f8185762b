// The text of a PDF as a reader gets it: Mozilla's PDF.js (pdfjs-dist, a devDependency, so `npm ci` is all a
// machine needs), an extractor independent of the pdfkit that wrote the file. It decodes the embedded font's
// ToUnicode map, so what comes back is what a person copying from the receipt would get. Lines are the
// text items joined in reading order, a newline where PDF.js ends a line (as pdftotext would print them).
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';

/** The text of every page of `pdf`, one line per line of the document, pages separated by a form feed. */
export async function pdfText(pdf: Uint8Array): Promise<string> {
  // PDF.js takes ownership of (and detaches) the buffer it is given: a copy keeps the caller's bytes.
  const doc = await getDocument({ data: new Uint8Array(pdf), isEvalSupported: false, disableFontFace: true, useSystemFonts: false, verbosity: 0 }).promise;
  try {
    const pages: string[] = [];
    for (let n = 1; n <= doc.numPages; n++) {
      const page = await doc.getPage(n);
      const content = await page.getTextContent();
      let text = '';
      for (const item of content.items) if ('str' in item) text += item.str + (item.hasEOL ? '\n' : '');
      pages.push(text);
    }
    return pages.join('\f');
  } finally {
    await doc.destroy();
  }
}
