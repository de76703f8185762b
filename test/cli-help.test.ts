// Every command and subcommand of the command line answers --help with its usage (exit 0), built from
// the same program the binary runs; the binary itself for the top-level cases and mark (own parser).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli.js';
import { optmarkHere } from './helpers/cli.js';

const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');

/** Every command path below the program: ['account'], ['account', 'create'], ... */
function paths(cmd: Command, prefix: string[] = []): string[][] {
  return cmd.commands.flatMap((c) => [[...prefix, c.name()], ...paths(c, [...prefix, c.name()])]);
}

async function runHere(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await optmarkHere(argv);
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('optmark --help', async () => {
  const all = paths(await buildProgram());

  it('knows every command', () => {
    const top = all.filter((p) => p.length === 1).map((p) => p[0]);
    expect(top).toEqual(expect.arrayContaining(['serve', 'account', 'key', 'usage', 'mark', 'signing-key', 'bench']));
    expect(all).toContainEqual(['bench', 'load']);
    expect(all).toContainEqual(['account', 'set-limits']);
  });

  it.each(all.filter((p) => p[0] !== 'mark').map((p) => [p.join(' '), p]))('%s --help prints its usage', async (_name, path) => {
    const r = await runHere([...(path as string[]), '--help']);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    expect(r.out).toContain(`Usage: optmark ${(path as string[]).join(' ')} `);
  });

  it('serve --help lists the settings it reads', async () => {
    const r = await runHere(['serve', '--help']);
    for (const name of ['OPTMARK_PORT', 'OPTMARK_DATA_DIR', 'OPTMARK_POOL_SIZE', 'OPTMARK_MAX_UPLOAD_BYTES']) expect(r.out).toContain(name);
  });

  it.each([[['--help']], [['mark', '--help']], [['bench', 'load', '--help']]])('the binary: optmark %j exits 0 with usage on stdout', (args) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.toLowerCase()).toContain('usage: optmark');
  });

  it.each([[['help']], [['mark', '-h']], [['usage', '--help']], [['help', 'account']]])(
    'optmark %j (in process) exits 0 with usage on stdout',
    async (args) => {
      const r = await runHere(args);
      expect(r.code).toBe(0);
      expect(r.out.toLowerCase()).toContain('usage: optmark');
    },
  );

  it("regression: --version is the package's version, and the OpenAPI document's info.version names the same release", () => {
    // Before: `optmark --version` printed 0.1.0 and docs/openapi.json (served at /api/v1/openapi.json) said
    // 1.0.0, a number no release had. info.version is the document's version (OpenAPI 3.1 §4.8.2), which
    // optmark ties to its release; the API's own version is the path prefix /api/v1 (service spec §9).
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = spawnSync(process.execPath, [CLI, '--version'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`${pkg.version}\n`);
    for (const file of [join(ROOT, 'docs', 'openapi.json'), join(ROOT, 'dist', 'docs', 'openapi.json')]) {
      const doc = JSON.parse(readFileSync(file, 'utf8')) as { info: { version: string; description: string } };
      expect(doc.info.version, file).toBe(pkg.version);
      expect(doc.info.description).toContain('`info.version` is the optmark release this document describes');
    }
  });

  it('no command: the overall usage on stderr and exit status 2', () => {
    const r = spawnSync(process.execPath, [CLI], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('Usage: optmark [options] [command]');
    for (const name of ['serve', 'account', 'key', 'usage', 'mark', 'signing-key', 'bench']) expect(r.stderr).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
  });

  it('bench load rejects bad values with a plain sentence before starting anything', async () => {
    const r = await runHere(['bench', 'load', '--max-steps', '0']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--max-steps <n>' argument '0' is invalid\. It must be a whole number of 1 or more\./);
    const s = await runHere(['bench', 'load', '--scenarios', 'upload']);
    expect(s.code).toBe(2);
    expect(s.err).toContain('unknown scenario "upload"');
  });
});
