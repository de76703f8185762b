// Tested as deployed (issue #22 item 7): three optmark processes on one PostgreSQL behind a real load
// balancer (HAProxy from Debian, on loopback), 16 clients racing for an account's 500 protects, one
// instance killed with -9 in the middle and started again. Each client sends an Idempotency-Key per
// logical request and retries an answer it did not get (cut, 502, 503, 409) with the same key, as a
// client that must not pay twice does: exactly the limit of logical requests succeed, and `usage` (the
// CLI, on another instance) says so. Without keys, a kill between a unit's commit and its answer's last
// byte charges a unit the client never saw (docs/scaling.md). Then a key revoked through one instance's CLI is refused by
// every instance, and the fingerprint key and provenance keys are the same everywhere.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallImage } from '../helpers/images.js';
import { TestServer, api, waitFor, type Answer } from '../helpers/server.js';
import { createTestDatabase } from '../helpers/stores.js';

const LIMIT = 500;
const CLIENTS = 16;

function haproxyBinary(): string {
  for (const p of ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy']) if (existsSync(p)) return p;
  const which = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim();
  if (which) return which;
  throw new Error('HAProxy is not installed (apt-get install -y haproxy; npm run test:long installs it as root)');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** HAProxy round-robin over the instances, health-checked on /readyz every 200 ms. */
class Balancer {
  proc: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'optmark-lb-'));
  port = 0;
  /** HAProxies replaced by reload, finishing what they have in flight. */
  readonly #retired: ChildProcess[] = [];

  async start(backends: number[]): Promise<void> {
    // Clients are sent to the new port only once HAProxy answers on it (a reload keeps the old one until then).
    const port = await freePort();
    const cfg = [
      'global',
      '  maxconn 1024',
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout client 60s',
      '  timeout server 60s',
      '  timeout check 5s',
      // A connection the killed instance refuses is tried again on another (nothing was sent yet).
      '  retries 2',
      '  option redispatch',
      'frontend api',
      `  bind 127.0.0.1:${port}`,
      '  default_backend optmark',
      'backend optmark',
      '  balance roundrobin',
      // HTTP/1.1 with a Host header: uWS does not answer HAProxy's default HTTP/1.0 check without one.
      '  option httpchk',
      '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost',
      '  http-check expect status 200',
      '  default-server inter 300ms fall 2 rise 1',
      ...backends.map((p, i) => `  server s${i} 127.0.0.1:${p} check`),
      '',
    ].join('\n');
    writeFileSync(join(this.dir, 'haproxy.cfg'), cfg);
    this.proc = spawn(haproxyBinary(), ['-db', '-f', join(this.dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    this.proc.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
    await waitFor('HAProxy to answer', async () => {
      if (this.proc!.exitCode !== null) throw new Error(`haproxy exited: ${err}`);
      try {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`);
        return r.status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    });
    this.port = port;
  }

  /**
   * A new HAProxy on a new port with the new backends takes the new requests; the old one stops
   * listening and finishes the answers it is passing on (soft stop, SIGUSR1), as an operator's reload
   * does. Killing it would cut answers of healthy instances whose units are already counted.
   */
  async reload(backends: number[]): Promise<void> {
    const old = this.proc;
    await this.start(backends);
    if (old) {
      this.#retired.push(old);
      old.kill('SIGUSR1');
    }
  }

  dispose(): void {
    for (const p of [...this.#retired, this.proc]) p?.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let db: { url: string; drop: () => Promise<void> };
const servers: TestServer[] = [];
const lb = new Balancer();

beforeAll(async () => {
  db = await createTestDatabase();
  const env = { OPTMARK_DATABASE_URL: db.url, OPTMARK_POOL_SIZE: '1', OPTMARK_QUEUE_LENGTH: '64' };
  // Started together: the schema is migrated once (advisory lock), whoever comes first.
  servers.push(...(await Promise.all([0, 1, 2].map(() => TestServer.start({ env })))));
  await lb.start(servers.map((s) => s.port));
});

afterAll(async () => {
  lb.dispose();
  for (const s of servers) await s.dispose();
  await db?.drop();
});

let lastError: unknown;
/** Why requests through the balancer got no answer (status 0), by cause: told when the count is off. */
const failures = new Map<string, number>();

/** POST through the balancer. */
function viaBalancer(endpoint: 'protect' | 'verify', key: string, image: Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const front = { port: lb.port, url: (path: string) => `http://127.0.0.1:${lb.port}${path}` } as unknown as TestServer;
  return api(front, endpoint, key, image, headers).catch((err: unknown) => {
    lastError = err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? String(err);
    failures.set(why, (failures.get(why) ?? 0) + 1);
    return { status: 0 } as Answer;
  });
}

describe('three instances on one PostgreSQL behind HAProxy', () => {
  it(`16 racing clients and a kill -9 of one instance: exactly ${LIMIT} protects granted, and usage says ${LIMIT}`, async () => {
    const { name, key } = await servers[0]!.account({ protect: LIMIT, verify: 100_000 });
    const image = await smallImage('jpeg');
    /** Logical requests that succeeded, by Idempotency-Key: each must be there once. */
    const succeeded = new Set<string>();
    let granted = 0;
    let replayed = 0;
    let retries = 0;
    let restarted = false;
    const seen = new Map<number, number>();
    const deadline = Date.now() + 240_000;
    /** One logical request: sent, and sent again with its key until it gets a final answer (200 or 429). */
    const logical = async (c: number, i: number): Promise<number> => {
      const idempotencyKey = `client-${c}-request-${i}`;
      for (let attempt = 0; Date.now() < deadline; attempt++) {
        if (attempt > 0) retries++;
        const a = await viaBalancer('protect', key, image, { 'Idempotency-Key': idempotencyKey });
        seen.set(a.status, (seen.get(a.status) ?? 0) + 1);
        if (a.status === 200) {
          if (a.headers['idempotent-replayed'] === 'true') replayed++;
          if (succeeded.has(idempotencyKey)) throw new Error(`${idempotencyKey} succeeded twice`);
          succeeded.add(idempotencyKey);
          granted++;
          return 200;
        }
        if (a.status === 429) return 429;
        // No answer, or not now (the instance died with the request: cut, 502; 503; 409 while its unit is held).
        if (a.status !== 503 && a.status !== 502 && a.status !== 409 && a.status !== 0) {
          throw new Error(`unexpected answer ${a.status}: ${JSON.stringify(a.json)}`);
        }
        const wait = a.status === 409 ? Number(a.headers['retry-after']) * 1000 : 20;
        await new Promise((r) => setTimeout(r, wait));
      }
      return 0;
    };
    const client = async (c: number): Promise<void> => {
      let refusedAfterRestart = 0;
      for (let i = 0; Date.now() < deadline; i++) {
        // Refused while every instance is up: the month is used up (two in a row, to be sure).
        if ((await logical(c, i)) === 429 && restarted && ++refusedAfterRestart >= 2) return;
      }
    };
    const killer = (async () => {
      await waitFor('a fifth of the limit granted', () => (granted >= LIMIT / 5 ? true : undefined), 120_000).catch((err: Error) => {
        throw new Error(
          `${err.message}; answers so far ${JSON.stringify([...seen])}; last error ${String(lastError)} ${String((lastError as Error)?.stack).slice(0, 300)}`,
        );
      });
      const victim = servers[1]!;
      victim.proc!.kill('SIGKILL');
      await victim.exited;
      await victim.restart(); // same data directory, a new port: the balancer's config is rewritten
      await lb.reload(servers.map((s) => s.port));
      restarted = true;
    })();
    await Promise.all([Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c))), killer]);
    const usage = await servers[2]!.usage(name);
    // A count that is off says which way: answers the clients saw, why some got none, retries and
    // replays, units counted and still held.
    const told = `answers ${JSON.stringify([...seen])}; no answer ${JSON.stringify([...failures])}; retries ${retries}, replayed ${replayed}; usage ${JSON.stringify(usage.protect)}, held ${JSON.stringify(usage.held)}`;
    console.log(`multi-instance: ${told}`);
    expect(restarted).toBe(true);
    expect(succeeded.size, told).toBe(LIMIT);
    expect(granted, told).toBe(LIMIT);
    expect(usage.protect, told).toMatchObject({ used: LIMIT, limit: LIMIT });
    expect(servers[1]!.output).toMatch(/"engine":"postgres"/);
  });

  it("a key revoked through one instance's CLI is refused by every instance within 5 s", async () => {
    const { key } = await servers[0]!.account();
    const image = await smallImage('jpeg');
    for (const s of servers) expect((await api(s, 'verify', key, image)).status).toBe(200);
    await servers[0]!.cliOk('key', 'revoke', key.slice(0, 16));
    // The promise is "within 5 s" (each instance caches a key for at most 2 s): after 5 s, every one refuses.
    await new Promise((r) => setTimeout(r, 5000));
    for (const s of servers) expect((await api(s, 'verify', key, image)).status).toBe(401);
  });

  it('every instance embeds and detects with the same fingerprint key, from the store', () => {
    const secrets = servers.map((s) => readFileSync(join(s.dataDir, 'fingerprint-shared.key')));
    expect(secrets[0]!.length).toBeGreaterThanOrEqual(16);
    for (const s of secrets) expect(s.equals(secrets[0]!)).toBe(true);
  });
});
