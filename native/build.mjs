// Builds the optional fingerprint addon with node-gyp during `npm install`. A failed build is not fatal:
// the TypeScript reference implementation serves instead (src/fingerprint/native.ts logs which one runs).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'binding.gyp'))) process.exit(0);
const r = spawnSync('node-gyp', ['rebuild', '-C', here], { stdio: 'inherit', shell: process.platform === 'win32' });
if (r.status !== 0) {
  console.warn('optmark: the native fingerprint addon did not build; the TypeScript implementation will be used.');
}
