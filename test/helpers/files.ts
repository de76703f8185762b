// Files on disk for the command-line tests: temporary folders removed together at the end, folders
// written from a table of relative paths, a folder read back as sorted paths, photo-like noise images, and
// the built binary run as a process (`node dist/src/cli.js`; `npm run build` first).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import sharp from 'sharp';
import { CLI, requireBuild, ROOT } from './server.js';

/** Temporary folders made by one test file; `removeAll()` in its afterAll. */
export class TempDirs {
  readonly #made: string[] = [];

  constructor(readonly prefix: string) {}

  /** A new empty folder under the system's temporary folder. */
  make(prefix = this.prefix): string {
    const d = mkdtempSync(join(tmpdir(), prefix));
    this.#made.push(d);
    return d;
  }

  /** A new folder holding `files` (relative path → bytes or text; sub-folders are made). */
  folder(files: Record<string, Uint8Array | string>): string {
    const dir = this.make('optmark-in-');
    for (const [rel, bytes] of Object.entries(files)) {
      mkdirSync(join(dir, rel, '..'), { recursive: true });
      writeFileSync(join(dir, rel), bytes);
    }
    return dir;
  }

  removeAll(): void {
    for (const d of this.#made.splice(0)) rmSync(d, { recursive: true, force: true });
  }
}

/** Every file under a folder (dot files too), as sorted relative paths. */
export function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(relative(dir, join(d, e.name)));
    }
  };
  walk(dir);
  return out.sort();
}

/** One gaussian-noise picture of `width` x `height` as JPEG, PNG and WebP, keyed by extension. */
export async function noiseImages(width: number, height: number): Promise<Map<string, Buffer>> {
  const base = sharp({ create: { width, height, channels: 3, noise: { type: 'gaussian', mean: 110, sigma: 35 } } });
  return new Map([
    ['jpg', await base.clone().jpeg().toBuffer()],
    ['png', await base.clone().png().toBuffer()],
    ['webp', await base.clone().webp().toBuffer()],
  ]);
}

export interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built binary (`node dist/src/cli.js ...args`) to its end, with `env` over this process's
 * environment and `input` on its stdin. Asynchronous: a spawnSync of a long command would starve vitest's
 * own messages (docs/testing.md). Killed after 120 s (status -1).
 */
export function runBinary(
  args: string[],
  options: { env: Record<string, string>; input?: string | Buffer | undefined; cwd?: string | undefined },
): Promise<Run> {
  requireBuild();
  const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, timeout: 120_000 });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  child.stdin.on('error', () => {}); // a program that exits without reading its input
  child.stdin.end(options.input ?? '');
  return new Promise((res, rej) => {
    child.on('error', rej);
    child.on('close', (code) => res({ status: code ?? -1, stdout, stderr }));
  });
}
