// A second `optmark serve` on a port another process listens on stops at once with a message naming
// the port (exit status 1), unless every process sharing it asks for that with OPTMARK_REUSE_PORT=1.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverUrl } from '../src/main.js';
import { read } from '../src/marking/engine.js';
import { smallImage } from './helpers/images.js';
import { CLI, freePort, ROOT, TestServer, waitFor } from './helpers/server.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Starts `serve` on `port`; resolves when it exits, or (with `until`) once its output matches. */
function serve(port: number, env: Record<string, string>, until?: RegExp): Promise<{ code: number | null; output: string; stop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'optmark-port-'));
  dirs.push(dataDir);
  const childEnv: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OPTMARK_')) childEnv[k] = v;
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    cwd: ROOT,
    env: {
      ...childEnv,
      OPTMARK_HOST: '127.0.0.1',
      OPTMARK_PORT: String(port),
      OPTMARK_DATA_DIR: dataDir,
      OPTMARK_POOL_SIZE: '1',
      OPTMARK_BOOTSTRAP: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
  proc.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
  const exited = new Promise<number | null>((res) => proc.on('close', (code) => res(code)));
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
  };
  return new Promise((resolve) => {
    void exited.then((code) => resolve({ code, output, stop }));
    if (until) void waitFor(`serve to print ${until}`, () => (until.test(output) ? true : undefined), 60_000).then(() => resolve({ code: null, output, stop }));
  });
}

describe('serve on a port in use', () => {
  let first: TestServer;
  beforeAll(async () => {
    first = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1' } });
  });
  afterAll(async () => {
    await first?.dispose();
  });

  it('stops with a message naming the port, and the first server keeps answering', async () => {
    const second = await serve(first.port, {});
    expect(second.code).toBe(1);
    expect(second.output).toContain(`cannot listen on 127.0.0.1:${first.port}: port ${first.port} is already in use by another process`);
    expect(second.output).toContain('OPTMARK_REUSE_PORT=1');
    expect(second.output).not.toMatch(/"msg":"listening"/);
    expect(second.output).not.toMatch(/\n\s+at /); // one message, no stack trace
    expect(await first.fetchStatus('/readyz')).toBe(200);
  });

  it('asking to share does not get a port that the first server holds exclusively (both must ask)', async () => {
    // This start skips the early check and fails in uWebSockets.js's own listen: the same message, and
    // the process exits (its worker pool and store are closed).
    const second = await serve(first.port, { OPTMARK_REUSE_PORT: '1' });
    expect(second.code).toBe(1);
    expect(second.output).toContain(`port ${first.port} is already in use`);
  });

  it('names the port when a process other than optmark holds it', async () => {
    const other = createServer();
    const port = await new Promise<number>((res) => other.listen(0, '127.0.0.1', () => res((other.address() as { port: number }).port)));
    try {
      const second = await serve(port, {});
      expect(second.code).toBe(1);
      expect(second.output).toContain(`port ${port} is already in use`);
    } finally {
      other.close();
    }
  });

  it('with OPTMARK_REUSE_PORT=1 on both, two servers share the port on purpose', async () => {
    // A port given by number: the kernel's pick for port 0 is never shared.
    const port = await freePort();
    const a = await serve(port, { OPTMARK_REUSE_PORT: '1' }, /"msg":"listening"/);
    expect(a.code).toBeNull();
    try {
      const b = await serve(port, { OPTMARK_REUSE_PORT: '1' }, /"msg":"listening"/);
      expect(b.code).toBeNull(); // still running
      expect(b.output).toContain(`"port":${port}`);
      await b.stop();
    } finally {
      await a.stop();
    }
  });
});

describe('the start-up key on a port the kernel picks', () => {
  it('regression: with OPTMARK_PORT=0 the key file names the port the server listens on (it said localhost:0)', async () => {
    const s = await serve(0, { OPTMARK_BOOTSTRAP: 'on' }, /created the first account/);
    try {
      expect(s.code).toBeNull();
      const port = Number(/"port":(\d+)/.exec(s.output)?.[1]);
      expect(port).toBeGreaterThan(0);
      const file = /"file":"([^"]+)"/.exec(s.output)![1]!;
      const text = readFileSync(file, 'utf8');
      expect(text).toMatch(/^ {2}om_live_\S+$/m);
      expect(text).toContain(` http://localhost:${port}/api/v1/protect\n`);
      // Regression: the example command, run as written beside a photo.jpg, writes the marked file (it
      // printed the JSON answer, a screenful of base64, to the terminal).
      const command = text.slice(text.indexOf('curl '), text.lastIndexOf('\n\n'));
      const dir = mkdtempSync(join(tmpdir(), 'optmark-try-'));
      try {
        writeFileSync(join(dir, 'photo.jpg'), await smallImage('jpeg'));
        const curl = spawnSync('bash', ['-c', command], { cwd: dir, encoding: 'utf8' });
        expect(curl.status, curl.stderr).toBe(0);
        expect(curl.stdout).toBe('');
        const marked = readFileSync(join(dir, 'photo.protected.jpg'));
        expect(read(marked)).toMatchObject({ optedOut: true, signals: ['iptc.dataMining'] });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      await s.stop();
    }
  });

  it.each([
    ['0.0.0.0', 'http://localhost:8080'],
    ['::', 'http://localhost:8080'],
    ['127.0.0.1', 'http://localhost:8080'],
    ['10.1.2.3', 'http://10.1.2.3:8080'],
    ['fd00::5', 'http://[fd00::5]:8080'],
  ])("the key's example command reaches a server on %s as %s", (host, url) => {
    expect(serverUrl(host, 8080)).toBe(url);
  });
});
