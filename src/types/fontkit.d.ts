// The part of fontkit (a dependency of pdfkit, declared in package.json too) that the receipt uses: the
// set of code points a font has glyphs for. fontkit ships no type declarations.
declare module 'fontkit' {
  export interface Font {
    readonly characterSet: number[];
  }
  export function create(buffer: Buffer | Uint8Array): Font;
}
