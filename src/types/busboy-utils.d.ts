// busboy's internal helpers module (CommonJS, no typings): only what src/pipeline/upload.ts uses.
declare module 'busboy/lib/utils.js' {
  const utils: { parseContentType(value: string): unknown };
  export default utils;
}
