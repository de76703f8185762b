/**
 * The data directory and the start-up key (issue #20, point 7): key hashes and usage are not readable
 * by other local users, and the first API key never lands in a collected log.
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BOOTSTRAP_KEY_FILE, secureDataDir } from '../../src/datadir.js';
import { smallImage } from '../helpers/images.js';
import { CLI, ROOT, TestServer, api, freePort, imageForm, requireBuild } from '../helpers/server.js';

const mode = (p: string): number => statSync(p).mode & 0o777;
const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'optmark-modes-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** One worker: these tests are about files, and a smaller pool starts sooner. */
const ENV = { OPTMARK_POOL_SIZE: '1' };

describe('modes of the data directory and the store; the start-up key without a terminal', () => {
  it('serve creates the data directory 0700 and optmark.db, -wal, -shm and the key file 0600; the key is in no output, its file is logged', async () => {
    const data = join(tempDir(), 'nested', 'data');
    const server = await TestServer.start({ dataDir: data, env: { ...ENV, OPTMARK_BOOTSTRAP: 'on' } });
    try {
      const file = join(data, BOOTSTRAP_KEY_FILE);
      const key = /^\s+(\S+)$/m.exec(readFileSync(file, 'utf8'))![1]!;
      expect(server.output).not.toContain(key);
      const line = server.output.split('\n').find((l) => l.includes(BOOTSTRAP_KEY_FILE));
      expect(JSON.parse(line!).file).toBe(file);
      const a = await api(server, 'verify', key, imageForm(await smallImage('jpeg')));
      expect(a.status).toBe(200);
      expect(mode(data)).toBe(0o700);
      for (const f of ['optmark.db', 'optmark.db-wal', 'optmark.db-shm', BOOTSTRAP_KEY_FILE]) {
        expect(existsSync(join(data, f)), f).toBe(true);
        expect(mode(join(data, f)), f).toBe(0o600);
      }
    } finally {
      await server.dispose();
    }
  });

  it('operator commands create the store private too; modes left readable are tightened at start, with a log line naming the file', async () => {
    requireBuild();
    const data = join(tempDir(), 'cli');
    await new Promise<void>((res, rej) =>
      execFile(process.execPath, [CLI, 'account', 'create', 'acme', '--plan', 'pro'], { cwd: ROOT, env: { ...process.env, OPTMARK_DATA_DIR: data } }, (err) =>
        err ? rej(err) : res(),
      ),
    );
    expect(mode(data)).toBe(0o700);
    expect(mode(join(data, 'optmark.db'))).toBe(0o600);
    // As an older version left them.
    chmodSync(data, 0o755);
    chmodSync(join(data, 'optmark.db'), 0o644);
    const server = await TestServer.start({ dataDir: data, env: ENV });
    try {
      expect(mode(data)).toBe(0o700);
      expect(mode(join(data, 'optmark.db'))).toBe(0o600);
      const lines = server.output
        .split('\n')
        .filter((l) => l.includes('its mode is tightened'))
        .map((l) => JSON.parse(l) as { path: string; from: string; to: string });
      expect(lines.some((l) => l.path === join(data, 'optmark.db') && l.from === '644' && l.to === '600')).toBe(true);
      expect(lines.some((l) => l.path === data && l.from === '755' && l.to === '700')).toBe(true);
    } finally {
      await server.dispose();
    }
  });

  it('secureDataDir leaves modes that are already private alone and reports nothing', () => {
    const data = tempDir();
    chmodSync(data, 0o700);
    writeFileSync(join(data, 'optmark.db'), '', { mode: 0o600 });
    expect(secureDataDir(data)).toEqual({ changes: [], problems: [] });
  });
});

describe('the start-up key on a terminal', () => {
  it('is printed there, and no file is written', async () => {
    requireBuild();
    const data = tempDir();
    mkdirSync(data, { recursive: true });
    const port = await freePort();
    // script(1) gives serve a pseudo-terminal as stdout; the shell stops serve once it is ready.
    const env = { ...process.env, ...ENV, OPTMARK_DATA_DIR: data, OPTMARK_PORT: String(port), OPTMARK_HOST: '127.0.0.1', OPTMARK_BOOTSTRAP: 'on' };
    const command = `node ${JSON.stringify(CLI)} serve & pid=$!; for i in $(seq 1 600); do curl -sf http://127.0.0.1:${port}/readyz >/dev/null 2>&1 && break; sleep 0.1; done; kill $pid; wait $pid`;
    const out = await new Promise<string>((res) =>
      execFile('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env, timeout: 90_000 }, (_err, stdout) => res(stdout)),
    );
    expect(out).toMatch(/Created account "default" \(plan pro\) with this API key/);
    expect(existsSync(join(data, BOOTSTRAP_KEY_FILE))).toBe(false);
  });
});
