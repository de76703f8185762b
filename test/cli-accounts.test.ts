// The operator commands end to end: `node dist/src/cli.js account|key|usage ...` on a temporary data
// directory, also while another connection (standing in for the running server) has the file open.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Store, monthOf } from '../src/store/index.js';

const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');
const KEY = /^om_live_[0-9A-Za-z]{43}$/;
let dataDir = '';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build` first');
});
beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'optmark-cli-'));
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

function optmark(...args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, OPTMARK_DATA_DIR: dataDir, OPTMARK_DEFAULT_PROTECT_LIMIT: '10000', OPTMARK_DEFAULT_VERIFY_LIMIT: '50000' },
  });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function ok(...args: string[]): string {
  const r = optmark(...args);
  expect(r.status, `optmark ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

function issue(account: string): string {
  const lines = ok('key', 'issue', account).trim().split('\n');
  return lines[lines.length - 1]!;
}

function openStore(): Store {
  return Store.open({ dataDir, defaultProtectLimit: 10_000, defaultVerifyLimit: 50_000 });
}

describe('operator commands', () => {
  it('create an account, set limits, issue, list and revoke keys, report usage', () => {
    expect(ok('account', 'create', 'acme', '--plan', 'pro')).toContain('acme');
    expect(ok('account', 'set-limits', 'acme', '--protect', '10', '--verify', '15')).toMatch(/10 protects and 15 verifies/);

    const issued = optmark('key', 'issue', 'acme');
    expect(issued.status).toBe(0);
    expect(issued.stdout).toMatch(/^om_live_[0-9A-Za-z]{43}\n$/); // the key, and nothing else, on stdout
    const key = issued.stdout.trim();
    expect(issued.stderr).not.toContain(key);

    const listed = ok('key', 'list', 'acme');
    expect(listed).toContain(key.slice(0, 16));
    expect(listed).not.toContain(key);
    expect(listed).toContain('active');

    const accounts = ok('account', 'list');
    expect(accounts).toMatch(/acme\s+pro\s+10\s+15/);
    expect(JSON.parse(ok('account', 'list', '--json'))).toMatchObject([{ name: 'acme', plan: 'pro', protectLimit: 10, verifyLimit: 15 }]);

    const store = openStore();
    const auth = store.authenticate(`Bearer ${key}`);
    if (!auth.ok) throw new Error(auth.message);
    for (let i = 0; i < 7; i++) store.reserve(auth.account.id, 'protect');
    store.reserve(auth.account.id, 'verify');
    store.close();

    const usage = ok('usage', 'acme');
    expect(usage).toMatch(/^protect\s+7\s+10\s+3$/m);
    expect(usage).toMatch(/^verify\s+1\s+15\s+14$/m);
    expect(usage).toContain(monthOf(new Date()));
    expect(JSON.parse(ok('usage', 'acme', '--json'))).toMatchObject({ account: 'acme', protect: { used: 7, limit: 10 }, verify: { used: 1 } });
    expect(ok('usage', 'acme', '--month', '2001-01')).toMatch(/^protect\s+0\s+10\s+10$/m);

    expect(ok('key', 'revoke', key.slice(0, 12))).toContain(`revoked key ${key.slice(0, 16)}`);
    expect(ok('key', 'list', 'acme')).toContain('revoked');
    expect(ok('key', 'revoke', key.slice(0, 12))).toContain('already revoked');
  });

  it('work while another connection has the database open, and apply at its next call', () => {
    ok('account', 'create', 'live', '--plan', 'lifetime');
    const key = issue('live');
    const server = openStore();
    const header = `Bearer ${key}`;
    const auth = server.authenticate(header);
    if (!auth.ok) throw new Error(auth.message);
    expect(server.reserve(auth.account.id, 'protect').ok).toBe(true);

    ok('account', 'set-limits', 'live', '--protect', '2');
    expect(server.reserve(auth.account.id, 'protect').ok).toBe(true);
    expect(server.reserve(auth.account.id, 'protect').ok).toBe(false);
    expect(ok('usage', 'live')).toMatch(/^protect\s+2\s+2\s+0$/m);

    ok('account', 'set-plan', 'live', 'free');
    expect(server.authenticate(header)).toMatchObject({ ok: false, code: 'plan_required' });
    ok('account', 'set-plan', 'live', '--plan', 'pro');
    expect(server.authenticate(header).ok).toBe(true);

    ok('key', 'revoke', key.slice(0, 12));
    expect(server.authenticate(header)).toMatchObject({ ok: false, code: 'invalid_api_key' });
    server.close();
  });

  it.each([
    ['duplicate account', ['account', 'create', 'dup', '--plan', 'pro'], 1, /already exists/],
    ['unknown account', ['key', 'issue', 'nobody'], 1, /no account named "nobody"/],
    ['unknown account usage', ['usage', 'nobody'], 1, /no account named "nobody"/],
    ['bad plan', ['account', 'create', 'x', '--plan', 'gold'], 2, /'gold' is invalid\. Allowed choices are free, pro, lifetime/],
    ['bad plan (set-plan)', ['account', 'set-plan', 'dup', 'gold'], 2, /plan must be one of free, pro, lifetime/],
    ['missing plan', ['account', 'create', 'x'], 2, /required option '--plan <plan>' not specified/],
    [
      'negative limit',
      ['account', 'set-limits', 'dup', '--protect', '-5'],
      2,
      /--protect <n\|default>' argument '-5' is invalid\. It must be a whole number of 0 or more/,
    ],
    [
      'negative limit (=)',
      ['account', 'set-limits', 'dup', '--verify=-1'],
      2,
      /--verify <n\|default>' argument '-1' is invalid\. It must be a whole number of 0 or more/,
    ],
    ['fractional limit', ['account', 'set-limits', 'dup', '--protect', '1.5'], 2, /whole number of 0 or more/],
    ['no limits given', ['account', 'set-limits', 'dup'], 2, /--protect and\/or --verify/],
    ['bad month', ['usage', 'dup', '--month', '2026-13'], 1, /YYYY-MM/],
    ['short prefix', ['key', 'revoke', 'om_live_ab'], 1, /at least 12 characters/],
    ['unknown prefix', ['key', 'revoke', 'om_live_ZZZZZZZZ'], 1, /no key starts with/],
    ['unknown subcommand', ['account', 'delete', 'dup'], 2, /unknown command 'delete'/],
    ['no subcommand', ['account'], 2, /Usage: optmark account/],
    ['unknown command', ['acount', 'list'], 2, /unknown command 'acount'.*\n.*Did you mean account\?/],
    ['unknown option', ['account', 'list', '--jsn'], 2, /unknown option '--jsn'/],
    ['extra argument', ['key', 'list', 'dup', 'more'], 2, /too many arguments for 'list'/],
  ])('%s: a non-zero exit with a one-line reason', (_name, args, status, message) => {
    ok('account', 'create', 'dup', '--plan', 'pro');
    const r = optmark(...args);
    expect(r.status).toBe(status);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('prints help for each command', () => {
    expect(ok('account', 'help')).toMatch(/set-limits \[options\] <name>/);
    expect(ok('account', 'help', 'set-limits')).toContain('Usage: optmark account set-limits [options] <name>');
    expect(ok('key', '--help')).toContain('revoke <key-prefix>');
  });

  it('says that a free account has no API access instead of announcing its limits', () => {
    const created = ok('account', 'create', 'hobby', '--plan', 'free');
    expect(created).toMatch(/^created account hobby: plan free, no API access/);
    expect(created).not.toMatch(/protects|verifies a month/);
    expect(ok('account', 'set-limits', 'hobby', '--protect', '5')).toMatch(/plan free, no API access/);
    expect(ok('account', 'list')).toMatch(/^hobby\s+free\s+no API access\s+-\s+\d{4}-/m);
    // The limits are kept for when the plan changes; JSON shows them as they are.
    expect(JSON.parse(ok('account', 'list', '--json'))).toMatchObject([{ name: 'hobby', plan: 'free', protectLimit: 5 }]);
    expect(ok('account', 'set-plan', 'hobby', '--plan', 'pro')).toMatch(/plan pro, 5 protects and 50000 verifies a month/);
  });

  it('names the UTC date and time the counters reset', () => {
    ok('account', 'create', 'acme', '--plan', 'pro');
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
    expect(ok('usage', 'acme')).toContain(`resets at ${next} 00:00 UTC (in `);
    expect(ok('usage', 'acme', '--month', '2001-01')).toContain('month over');
  });

  it('never prints a whole key when one is passed to revoke', () => {
    ok('account', 'create', 'acme', '--plan', 'pro');
    const key = issue('acme');
    expect(key).toMatch(KEY);
    const r = optmark('key', 'revoke', key);
    expect(r.status).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(key);
    const again = optmark('key', 'revoke', `${key.slice(0, -1)}${key.endsWith('a') ? 'b' : 'a'}`);
    expect(again.status).toBe(1);
    expect(again.stderr).not.toContain(key.slice(0, -1));
  });
});
