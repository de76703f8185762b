// Prints 1 when a C compiler here can build and link against libjpeg (jpeglib.h and -ljpeg), else 0:
// binding.gyp builds optmark_jpeg (native/src/jpeg.cc) only then. OPTMARK_NO_JPEG=1 prints 0.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let ok = false;
if (process.env.OPTMARK_NO_JPEG !== '1' && process.platform !== 'win32') {
  const dir = mkdtempSync(join(tmpdir(), 'optmark-jpeg-'));
  const program = '#include <stdio.h>\n#include <jpeglib.h>\nint main(void) { struct jpeg_error_mgr e; return jpeg_std_error(&e) == 0; }\n';
  const r = spawnSync(process.env.CC || 'cc', ['-x', 'c', '-', '-o', join(dir, 'probe'), '-ljpeg'], { input: program, stdio: ['pipe', 'ignore', 'ignore'] });
  ok = r.status === 0;
  rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(ok ? '1' : '0');
