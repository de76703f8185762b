// Builds the optional native addons (byte helpers, fingerprint core) with node-gyp during `npm install`. A failed build is not fatal:
// the portable code serves instead (src/native/ reports which addon is missing and how to build it).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'binding.gyp'))) process.exit(0);
const r = spawnSync('node-gyp', ['rebuild', '-C', here], { stdio: 'inherit', shell: process.platform === 'win32' });
if (r.status !== 0) {
  console.warn(
    'optmark: the native addons did not build; optmark runs without them (slower). Build them later with: npx node-gyp rebuild -C native (needs python3, make and a C++ compiler).',
  );
}
