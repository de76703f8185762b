// A data directory that cannot be used (OPTMARK_DATA_DIR names a file, or a path through one, or one this
// user may not write) stops `serve` and the operator commands with one line naming the directory, why,
// and the setting to change: no stack trace. Other file system refusals under it are one line too.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirError, makePrivateDir } from '../src/datadir.js';
import { optmarkHere } from './helpers/cli.js';
import { CLI, ROOT } from './helpers/server.js';

const base = mkdtempSync(join(tmpdir(), 'optmark-datadir-'));
const aFile = join(base, 'not-a-dir');
writeFileSync(aFile, 'x');
afterAll(() => rmSync(base, { recursive: true, force: true }));

const STACK = /\n\s+at /;

describe('an unusable data directory', () => {
  it('serve stops at once with a plain message when OPTMARK_DATA_DIR is a file', () => {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OPTMARK_')) env[k] = v;
    const r = spawnSync(process.execPath, [CLI, 'serve'], {
      cwd: ROOT,
      env: { ...env, OPTMARK_DATA_DIR: aFile, OPTMARK_HOST: '127.0.0.1', OPTMARK_PORT: '0', OPTMARK_BOOTSTRAP: 'off', OPTMARK_POOL_SIZE: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const out = r.stdout + r.stderr;
    expect(r.status).toBe(1);
    expect(out).toContain(`optmark: cannot use the data directory ${aFile}: it is a file, not a directory.`);
    expect(out).toContain('Set OPTMARK_DATA_DIR');
    expect(out).not.toMatch(STACK);
    expect(out).not.toMatch(/"msg":"listening"/);
  });

  it('operator commands say the same when a part of the path is a file', async () => {
    const dir = join(aFile, 'data');
    for (const args of [
      ['account', 'list'],
      ['key', 'list', 'someone'],
      ['usage', 'someone'],
    ]) {
      const r = await optmarkHere(args, { OPTMARK_DATA_DIR: dir });
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toBe(
        `optmark: cannot use the data directory ${dir}: a part of the path is a file, not a directory. Set OPTMARK_DATA_DIR to a directory this user can create and write (default ./data)\n`,
      );
    }
  });

  it('a directory this user may not write is refused before anything is created in it', () => {
    // access(2) says whether this user may write; root may write anywhere but on a read-only file
    // system, so the refusal is made from the error the check would get (the same constructor).
    const err = new DataDirError('/srv/optmark', 'EACCES');
    expect(err.message).toBe(
      'cannot use the data directory /srv/optmark: permission denied for this user. Set OPTMARK_DATA_DIR to a directory this user can create and write (default ./data)',
    );
    expect(new DataDirError('/mnt/ro', 'EROFS').message).toContain('the file system is read-only');
    expect(new DataDirError('/x', 'EWEIRD').message).toContain('the system refused it (EWEIRD)');
    expect(() => makePrivateDir(join(aFile, 'deeper'))).toThrow(DataDirError);
    const ok = join(base, 'fresh', 'data');
    makePrivateDir(ok);
    expect(() => makePrivateDir(ok)).not.toThrow();
  });

  it('a file where the data directory needs a folder (signing/) is one line naming the path', async () => {
    const dir = join(base, 'signing-blocked');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'signing'), 'not a folder');
    const r = await optmarkHere(['signing-key', 'rotate'], { OPTMARK_DATA_DIR: dir });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^optmark: cannot \\w+ ${join(dir, 'signing')}\\S*: (a part of the path is a file, not a directory|it is a file, not a directory) \\((ENOTDIR|EEXIST)\\)\\n$`,
      ),
    );
  });
});
