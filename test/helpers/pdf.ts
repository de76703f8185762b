// The text of a PDF as pdfkit writes it, for tests: its content streams (FlateDecode) hold the text as
// hex strings (<48656c6c6f> Tj, or [<..> 120 <..>] TJ with kerning); the pieces of one line are joined.
import { inflateSync } from 'node:zlib';

export function pdfText(pdf: Buffer): string {
  const out: string[] = [];
  const latin = pdf.toString('latin1');
  const re = /stream\r?\n/g;
  for (let m = re.exec(latin); m; m = re.exec(latin)) {
    const start = m.index + m[0].length;
    const end = latin.indexOf('endstream', start);
    let content: string;
    try {
      content = inflateSync(pdf.subarray(start, end)).toString('latin1');
    } catch {
      continue; // not a deflated stream (fonts are not embedded; nothing else is expected)
    }
    for (const line of content.split(/T[Jj]\n/)) {
      const pieces = [...line.matchAll(/<([0-9a-fA-F]*)>/g)].map((h) => Buffer.from(h[1]!, 'hex').toString('latin1'));
      if (pieces.length) out.push(pieces.join(''));
    }
  }
  return out.join('\n');
}
