/**
 * Builds the dashboard (web/) into dist/web: hashed asset names, no inline script or style (the CSP
 * forbids both), and a .gz and .br twin of every text file, so the server sends them precompressed.
 */
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

/** The most the page's text files may weigh gzipped, in bytes. */
const BUNDLE_BUDGET = 100 * 1000;
const root = fileURLToPath(new URL('.', import.meta.url));
const outDir = fileURLToPath(new URL('../dist/web', import.meta.url));

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else yield p;
  }
}

/** Writes file.gz and file.br beside each text file of the build. */
function precompress(): Plugin {
  return {
    name: 'optmark-precompress',
    apply: 'build',
    closeBundle() {
      let gzipped = 0;
      for (const file of files(outDir)) {
        if (!/\.(html|js|css|svg|json|txt)$/.test(file)) continue;
        const bytes = readFileSync(file);
        const gz = gzipSync(bytes, { level: 9 });
        gzipped += gz.length;
        writeFileSync(`${file}.gz`, gz);
        writeFileSync(
          `${file}.br`,
          brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }),
        );
      }
      // The budget (point 9): the page's code, style and HTML at most 100 KB gzipped.
      const line = `dashboard bundle: ${(gzipped / 1000).toFixed(1)} KB gzipped (budget 100 KB)`;
      if (gzipped > BUNDLE_BUDGET) throw new Error(`${line}: over budget`);
      console.log(line);
    },
  };
}

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir,
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    // Inlined assets would become data: URLs; keep every asset a file of its own.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    sourcemap: false,
  },
  plugins: [precompress()],
});
