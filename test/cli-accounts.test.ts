// The operator commands end to end: `node dist/src/cli.js account|key|usage ...` on a temporary data
// directory, also while another connection (standing in for the running server) has the file open.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore, monthOf } from '../src/store/index.js';
import { optmarkHere } from './helpers/cli.js';

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

/** `optmark ...args` on the test's data directory, in this process (test/helpers/cli.ts). */
function optmark(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return optmarkHere(args, { OPTMARK_DATA_DIR: dataDir, OPTMARK_DEFAULT_PROTECT_LIMIT: '10000', OPTMARK_DEFAULT_VERIFY_LIMIT: '50000' });
}

/** The binary itself, for what only a process shows (its exit status, its stdout alone). */
function optmarkBinary(...args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, OPTMARK_DATA_DIR: dataDir, OPTMARK_DEFAULT_PROTECT_LIMIT: '10000', OPTMARK_DEFAULT_VERIFY_LIMIT: '50000' },
  });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

async function ok(...args: string[]): Promise<string> {
  const r = await optmark(...args);
  expect(r.status, `optmark ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

async function issue(account: string): Promise<string> {
  const lines = (await ok('key', 'issue', account)).trim().split('\n');
  return lines[lines.length - 1]!;
}

function openStore(): SqliteStore {
  return SqliteStore.openSync({ dataDir, defaultProtectLimit: 10_000, defaultVerifyLimit: 50_000 });
}

/** Takes and keeps one unit, as an answered request does. */
function use(store: SqliteStore, accountId: number, op: 'protect' | 'verify'): void {
  const r = store.reserveSync(accountId, op);
  if (r.ok) store.commitSync(r.reservation);
}

describe('operator commands', async () => {
  it('create an account, set limits, issue, list and revoke keys, report usage', async () => {
    expect(await ok('account', 'create', 'acme', '--plan', 'pro')).toContain('acme');
    expect(await ok('account', 'set-limits', 'acme', '--protect', '10', '--verify', '15')).toMatch(/10 protects and 15 verifies/);
    // Regression: "default" (follow the configured default again) was refused as "a limit must be a whole
    // number from 0 to 2147483648, got " (commander turned the parser's null into '').
    expect(await ok('account', 'set-limits', 'acme', '--protect', 'default')).toMatch(/10000 protects and 15 verifies/);
    expect(await ok('account', 'set-limits', 'acme', '--protect', '7', '--verify', 'default')).toMatch(/7 protects and 50000 verifies/);
    expect(await ok('account', 'set-limits', 'acme', '--protect', '10', '--verify', '15')).toMatch(/10 protects and 15 verifies/);

    // The binary: standard output is the key alone (scripts take it), the note goes to stderr.
    const issued = optmarkBinary('key', 'issue', 'acme');
    expect(issued.status).toBe(0);
    expect(issued.stdout).toMatch(/^om_live_[0-9A-Za-z]{43}\n$/); // the key, and nothing else, on stdout
    const key = issued.stdout.trim();
    expect(issued.stderr).not.toContain(key);

    const listed = await ok('key', 'list', 'acme');
    expect(listed).toContain(key.slice(0, 16));
    expect(listed).not.toContain(key);
    expect(listed).toContain('active');

    const accounts = await ok('account', 'list');
    expect(accounts).toMatch(/acme\s+pro\s+10\s+15/);
    expect(JSON.parse(await ok('account', 'list', '--json'))).toMatchObject([{ name: 'acme', plan: 'pro', protectLimit: 10, verifyLimit: 15 }]);

    const store = openStore();
    const auth = store.authenticateSync(`Bearer ${key}`);
    if (!auth.ok) throw new Error(auth.message);
    for (let i = 0; i < 7; i++) use(store, auth.account.id, 'protect');
    use(store, auth.account.id, 'verify');
    store.closeSync();

    const usage = await ok('usage', 'acme');
    expect(usage).toMatch(/^protect\s+7\s+10\s+3$/m);
    expect(usage).toMatch(/^verify\s+1\s+15\s+14$/m);
    expect(usage).toContain(monthOf(new Date()));
    expect(JSON.parse(await ok('usage', 'acme', '--json'))).toMatchObject({ account: 'acme', protect: { used: 7, limit: 10 }, verify: { used: 1 } });
    expect(await ok('usage', 'acme', '--month', '2001-01')).toMatch(/^protect\s+0\s+10\s+10$/m);

    expect(await ok('key', 'revoke', key.slice(0, 12))).toContain(`revoked key ${key.slice(0, 16)}`);
    expect(await ok('key', 'list', 'acme')).toContain('revoked');
    expect(await ok('key', 'revoke', key.slice(0, 12))).toContain('already revoked');
  });

  it('work while another connection has the database open, and apply at its next call', async () => {
    await ok('account', 'create', 'live', '--plan', 'lifetime');
    const key = await issue('live');
    const server = openStore();
    const header = `Bearer ${key}`;
    const auth = server.authenticateSync(header);
    if (!auth.ok) throw new Error(auth.message);
    expect(server.reserveSync(auth.account.id, 'protect').ok).toBe(true);

    await ok('account', 'set-limits', 'live', '--protect', '2');
    expect(server.reserveSync(auth.account.id, 'protect').ok).toBe(true);
    expect(server.reserveSync(auth.account.id, 'protect').ok).toBe(false);
    expect(await ok('usage', 'live')).toMatch(/^protect\s+2\s+2\s+0$/m);

    await ok('account', 'set-plan', 'live', 'free');
    expect(server.authenticateSync(header)).toMatchObject({ ok: false, code: 'plan_required' });
    await ok('account', 'set-plan', 'live', '--plan', 'pro');
    expect(server.authenticateSync(header).ok).toBe(true);

    // Longer than the listed prefix but not the whole key: the rest cannot be checked, so it is refused.
    const mistyped = await optmark('key', 'revoke', `${key.slice(0, 16)}ZZZZZZ`);
    expect(mistyped.status).toBe(1);
    expect(mistyped.stderr).toMatch(/is neither a whole key nor a prefix of at most 16 characters/);
    expect(mistyped.stderr).not.toContain('ZZZZZZ'); // what was typed may be a key: only its prefix is echoed
    expect(server.authenticateSync(header).ok).toBe(true);
    await ok('key', 'revoke', key.slice(0, 12));
    expect(server.authenticateSync(header)).toMatchObject({ ok: false, code: 'invalid_api_key' });
    server.closeSync();
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
    ['no limits given', ['account', 'set-limits', 'dup'], 2, /--protect, --verify and\/or --vault/],
    ['bad month', ['usage', 'dup', '--month', '2026-13'], 1, /YYYY-MM/],
    ['short prefix', ['key', 'revoke', 'om_live_ab'], 1, /at least 12 characters/],
    ['unknown prefix', ['key', 'revoke', 'om_live_ZZZZZZZZ'], 1, /no key starts with/],
    ['unknown subcommand', ['account', 'delete', 'dup'], 2, /unknown command 'delete'/],
    ['no subcommand', ['account'], 2, /Usage: optmark account/],
    ['unknown command', ['acount', 'list'], 2, /unknown command 'acount'.*\n.*Did you mean account\?/],
    ['unknown option', ['account', 'list', '--jsn'], 2, /unknown option '--jsn'/],
    ['extra argument', ['key', 'list', 'dup', 'more'], 2, /too many arguments for 'list'/],
  ])('%s: a non-zero exit with a one-line reason', async (_name, args, status, message) => {
    await ok('account', 'create', 'dup', '--plan', 'pro');
    const r = await optmark(...args);
    expect(r.status).toBe(status);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('the binary exits 2 on a usage error with a one-line reason on stderr, and 1 on a store error', async () => {
    await ok('account', 'create', 'dup', '--plan', 'pro');
    const usage = optmarkBinary('account', 'set-limits', 'dup', '--protect', '-5');
    expect(usage.status).toBe(2);
    expect(usage.stdout).toBe('');
    expect(usage.stderr).toMatch(/^error: option '--protect <n\|default>' argument '-5' is invalid\. It must be a whole number of 0 or more/);
    const store = optmarkBinary('usage', 'nobody');
    expect(store.status).toBe(1);
    expect(store.stderr).toBe('optmark usage: no account named "nobody" (see: optmark account list)\n');
  });

  it('prints help for each command', async () => {
    expect(await ok('account', 'help')).toMatch(/set-limits \[options\] <name>/);
    expect(await ok('account', 'help', 'set-limits')).toContain('Usage: optmark account set-limits [options] <name>');
    expect(await ok('key', '--help')).toContain('revoke <key-prefix>');
  });

  it('says that a free account has no API access instead of announcing its limits', async () => {
    const created = await ok('account', 'create', 'hobby', '--plan', 'free');
    expect(created).toMatch(/^created account hobby: plan free, no API access/);
    expect(created).not.toMatch(/protects|verifies a month/);
    expect(await ok('account', 'set-limits', 'hobby', '--protect', '5')).toMatch(/plan free, no API access/);
    expect(await ok('account', 'list')).toMatch(/^hobby\s+free\s+no API access\s+-\s+\d{4}-/m);
    // The limits are kept for when the plan changes; JSON shows them as they are.
    expect(JSON.parse(await ok('account', 'list', '--json'))).toMatchObject([{ name: 'hobby', plan: 'free', protectLimit: 5 }]);
    expect(await ok('account', 'set-plan', 'hobby', '--plan', 'pro')).toMatch(/plan pro, 5 protects and 50000 verifies a month/);
  });

  it('names the UTC date and time the counters reset', async () => {
    await ok('account', 'create', 'acme', '--plan', 'pro');
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
    expect(await ok('usage', 'acme')).toContain(`resets at ${next} 00:00 UTC (in `);
    expect(await ok('usage', 'acme', '--month', '2001-01')).toContain('month over');
  });

  it('never prints a whole key when one is passed to revoke', async () => {
    await ok('account', 'create', 'acme', '--plan', 'pro');
    const key = await issue('acme');
    expect(key).toMatch(KEY);
    const r = await optmark('key', 'revoke', key);
    expect(r.status).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(key);
    const again = await optmark('key', 'revoke', `${key.slice(0, -1)}${key.endsWith('a') ? 'b' : 'a'}`);
    expect(again.status).toBe(1);
    expect(again.stderr).not.toContain(key.slice(0, -1));
  });
});
