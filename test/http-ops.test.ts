// Operating the server: health, readiness and transport, metrics, the served OpenAPI document, config
// validation, the uWS fallback gate, a full pool, the task deadline, and graceful shutdown.
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/errors.js';
import { STATUS_OF } from '../src/http/errors.js';
import { expectConforms, expectError, sha256 } from './helpers/assert.js';
import { GIF, jpegOfSize, slowPng, smallImage } from './helpers/images.js';
import { FixtureSet } from './helpers/fixtures.js';
import { OPENAPI } from './helpers/openapi.js';
import {
  ROOT,
  TestServer,
  api,
  connectionRefused,
  heldUpload,
  imageForm,
  openConnection,
  rawRequest,
  request,
  waitFor,
  type Answer,
  type HeldUpload,
} from './helpers/server.js';

let small: Buffer;
let slow: Buffer;
beforeAll(async () => {
  small = await smallImage('jpeg');
  slow = await slowPng();
});

/** The samples of one metric whose labels include `labels`, summed. */
function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      sum += Number(m[3]);
      found = true;
    }
  }
  if (!found) throw new Error(`no sample of ${name} ${JSON.stringify(labels)}`);
  return sum;
}

/** A verify upload paused after `holdAt` body bytes, once the server counts it in flight. */
async function uploadInFlight(server: TestServer, key: string, image: Buffer, holdAt: number): Promise<HeldUpload> {
  const form = imageForm(image);
  const upload = heldUpload(
    server.port,
    { path: '/api/v1/verify', headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType }, body: form.body, chunks: 16 * 1024 },
    holdAt,
  );
  await upload.held;
  await server.readyzUntil('the upload to be in flight', (r) => r.inflight.requests === 1);
  return upload;
}

describe('a default server', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '2' } });
    ({ key } = await server.account());
  });
  afterAll(async () => {
    await server?.dispose();
  });

  it("regression: README's quick start shows every field of verify's answer, and what ExifTool prints of the field", async () => {
    // Before: the example answer lacked c2pa, otherSignals and record, and README said ExifTool prints
    // "Prohibited for AI/ML training", which only ExifTool 12.67 and later do (Debian 12's 12.57 prints the URI).
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const example = readme
      .split('\n')
      .filter((l) => l.startsWith('# {') || l.startsWith('#  "'))
      .join('');
    const marked = Buffer.from((await api(server, 'protect', key, small)).json.imageBase64, 'base64');
    const v = await api(server, 'verify', key, marked);
    expect(v.status).toBe(200);
    for (const field of Object.keys(v.json)) expect(example, field).toContain(`"${field}":`);
    const fx = new FixtureSet();
    try {
      const version = await fx.exiftool.version();
      const printed = (await fx.exiftool.read(fx.write('p.jpg', marked))) as { DataMining?: string };
      // The ExifTool the tests run is the newer kind; README names both.
      expect(Number(version)).toBeGreaterThanOrEqual(12.67);
      expect(printed.DataMining).toBe('Prohibited for AI/ML training');
      expect(readme).toContain("`Prohibited for AI/ML training` (ExifTool 12.67 and later; older ones, as Debian 12's 12.57, print the URI)");
    } finally {
      await fx.close();
    }
  });

  it('/healthz and /readyz answer, and say the native uWS transport runs', async () => {
    const h = await request(server, '/healthz');
    expect(h.json).toEqual({ status: 'ok' });
    expectConforms(h, 'get', '/healthz');
    const r = await request(server, '/readyz');
    expect(r.status).toBe(200);
    expectConforms(r, 'get', '/readyz');
    expect(r.json).toMatchObject({ status: 'ready', transport: 'uws-native', store: 'ok', pool: { threads: 2 }, inflight: { requests: 0, bytes: 0 } });
    // The log says it too, and the native binary really is mapped into the process.
    expect(server.output).toMatch(/"transport":"uws-native".*"msg":"listening"/);
    expect(readFileSync(`/proc/${server.proc!.pid}/maps`, 'utf8')).toMatch(/uws_linux_[^/\s]+\.node/);
  });

  it('HEAD is answered wherever GET is (RFC 9110 9.1): the same status and headers, the length of the GET body, no body', async () => {
    /** The raw bytes of one HEAD exchange: the head, and whatever follows it within 300 ms (nothing should). */
    const head = (path: string, auth?: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect({ port: server.port, host: '127.0.0.1' });
        let got = '';
        let timer: NodeJS.Timeout | undefined;
        socket.setEncoding('latin1').on('data', (d: string) => {
          got += d;
          if (!timer && got.includes('\r\n\r\n')) timer = setTimeout(() => socket.destroy(), 300);
        });
        socket.on('error', reject).on('close', () => resolve(got));
        const authorization = auth ? `Authorization: Bearer ${auth}\r\n` : '';
        socket.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n${authorization}\r\n`);
      });
    const page = await request(server, '/');
    const script = /src="(\/assets\/[^"]+)"/.exec(page.body.toString())?.[1];
    expect(script).toBeDefined();
    for (const [path, auth] of [
      ['/healthz'],
      ['/readyz'],
      ['/metrics'],
      ['/api/v1/openapi.json'],
      ['/'],
      [script!],
      ['/api/v1/dashboard/account', key],
    ] as Array<[string, string?]>) {
      const get = await request(server, path, { headers: { 'Accept-Encoding': 'identity', ...(auth ? { Authorization: `Bearer ${auth}` } : {}) } });
      const raw = await head(path, auth);
      const [top, body] = raw.split('\r\n\r\n');
      expect(top, path).toMatch(new RegExp(`^HTTP/1.1 ${get.status} `));
      expect(body, path).toBe('');
      const length = /\r\ncontent-length: (\d+)/i.exec(top!)?.[1];
      // /readyz and /metrics change between the two calls (counters, pool figures): their length may too.
      if (path === '/readyz' || path === '/metrics') expect(Number(length), path).toBeGreaterThan(0);
      else expect(Number(length), path).toBe(get.body.length);
      expect(top!.toLowerCase(), path).toContain(`content-type: ${get.headers['content-type']}`.toLowerCase());
    }
    // A route that takes POST only still says so, without a body.
    expect(await head('/api/v1/protect')).toMatch(/^HTTP\/1.1 405 [\s\S]*\r\nAllow: POST\r\n[\s\S]*\r\n\r\n$/);
  });

  it('/readyz reports the native addons: loaded (and mapped) when built, else why not', async () => {
    const r = await request(server, '/readyz');
    const maps = readFileSync(`/proc/${server.proc!.pid}/maps`, 'utf8');
    for (const name of ['bytes', 'fingerprint'] as const) {
      const state = (r.json.native as Record<string, { loaded: boolean; simd?: string; error?: string }>)[name]!;
      if (existsSync(join(ROOT, 'native', 'build', 'Release', `optmark_${name}.node`))) {
        expect(state, name).toMatchObject({ loaded: true, simd: expect.any(String) });
        expect(maps).toContain(`optmark_${name}.node`);
      } else {
        expect(state, name).toMatchObject({ loaded: false, error: expect.any(String) });
        expect(server.output).toContain(`optmark_${name}.node unavailable`);
      }
    }
  });

  it('serves the OpenAPI document kept in the repository, and the server has every route it describes', async () => {
    const a = await request(server, '/api/v1/openapi.json');
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toBe('application/json');
    expect(a.json).toEqual(JSON.parse(readFileSync(join(ROOT, 'docs', 'openapi.json'), 'utf8')));
    expect(a.json.openapi).toMatch(/^3\.1\./);
    for (const [path, item] of Object.entries(OPENAPI.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) {
        const answer = await request(server, path, { method: method.toUpperCase() });
        expectConforms(answer, method, path); // unauthenticated API calls: the documented 401
      }
    }
  });

  it('/metrics counts requests by route and status, latency, bytes, and shows the pool', async () => {
    const scrape = async (): Promise<string> => {
      const m = await request(server, '/metrics');
      expect(m.status).toBe(200);
      expect(m.headers['content-type']).toMatch(/^text\/plain/);
      return m.body.toString('utf8');
    };
    const before = await scrape();
    const form = imageForm(small);
    const ok = await Promise.all([api(server, 'protect', key, form), api(server, 'protect', key, form)]);
    expect(ok.map((a) => a.status)).toEqual([200, 200]);
    expect((await api(server, 'protect', key, imageForm(GIF, 'a.gif', 'image/gif'))).status).toBe(415);
    expect((await api(server, 'protect', undefined, form)).status).toBe(401);
    expect((await request(server, '/no/such/route')).status).toBe(404);
    const aborted = await rawRequest(server.port, {
      path: '/api/v1/verify',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': form.contentType },
      body: form.body,
      abortAfter: 100,
      onProgress: () => server.readyzUntil('the request to be in flight', (r) => r.inflight.requests === 1), // then hang up
    });
    expect(aborted.status).toBe(0);
    await server.settled();
    const after = await scrape();

    const delta = (name: string, labels: Record<string, string> = {}): number => {
      let was = 0;
      try {
        was = metric(before, name, labels);
      } catch {
        // not there before: counted from 0
      }
      return metric(after, name, labels) - was;
    };
    const protect = { route: '/api/v1/protect' };
    expect(delta('optmark_http_requests_total', { ...protect, status: '200' })).toBe(2);
    expect(delta('optmark_http_requests_total', { ...protect, status: '415' })).toBe(1);
    expect(delta('optmark_http_requests_total', { ...protect, status: '401' })).toBe(1);
    expect(delta('optmark_http_requests_total', { route: 'other', status: '404' })).toBe(1);
    expect(delta('optmark_http_requests_total', { route: '/api/v1/verify', status: '499' })).toBe(1); // client went away
    expect(delta('optmark_http_request_duration_seconds_count', protect)).toBe(4);
    expect(delta('optmark_http_request_duration_seconds_bucket', { ...protect, le: '+Inf' })).toBe(4);
    expect(delta('optmark_http_received_bytes_total', protect)).toBeGreaterThanOrEqual(2 * form.body.length);
    expect(delta('optmark_http_sent_bytes_total', protect)).toBeGreaterThanOrEqual(ok[0]!.body.length + ok[1]!.body.length);
    expect(metric(after, 'optmark_pool_threads')).toBe(2);
    expect(metric(after, 'optmark_pool_running_tasks')).toBe(0);
    expect(metric(after, 'optmark_pool_queue_depth')).toBe(0);
    expect(metric(after, 'optmark_pool_completed_tasks')).toBeGreaterThanOrEqual(2);
    const utilization = metric(after, 'optmark_pool_utilization_ratio');
    expect(utilization).toBeGreaterThanOrEqual(0);
    expect(utilization).toBeLessThanOrEqual(1);
    expect(metric(after, 'optmark_inflight_upload_bytes')).toBe(0);
    // The store's checkpoints run on their own thread, once a second.
    expect(metric(after, 'optmark_store_checkpointer_running')).toBe(1);
    await waitFor('a background checkpoint', async () =>
      metric((await request(server, '/metrics')).body.toString(), 'optmark_store_checkpoints') >= 1 ? true : undefined,
    );
    expect(after).toMatch(/^# TYPE optmark_http_request_duration_seconds histogram$/m);
    expect(metric(after, 'optmark_process_cpu_seconds_total')).toBeGreaterThan(0);
  });
});

describe("README's error table", () => {
  it('regression: lists every code the public API answers with, under the status it is answered with', () => {
    // Before: the three Idempotency-Key codes (400, 409, 422) were missing, though protect and verify answer them.
    const rows = readFileSync(join(ROOT, 'README.md'), 'utf8')
      .split('\n')
      .filter((l) => /^\| \d{3}( \/ \d{3})? \|/.test(l))
      .map((l) => l.split('|').map((c) => c.trim()));
    const listed = new Map<string, number>();
    for (const [, statuses, codes] of rows) {
      const st = statuses!.split(' / ').map(Number);
      const cs = [...codes!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!);
      cs.forEach((c, i) => listed.set(c, st[Math.min(i, st.length - 1)]!));
    }
    // Codes of the routes beside protect and verify are in their manuals, each with its status.
    const elsewhere: Record<string, string> = {
      invalid_request: '',
      batch_too_large: '',
      batch_full: '',
      vault_disabled: 'vault.md',
      vault_quota_exceeded: 'vault.md',
      range_not_satisfiable: 'vault.md',
      invalid_source: 'scans.md',
      local_source_not_allowed: 'scans.md',
      scan_limit_exceeded: 'scans.md',
    };
    for (const code of ERROR_CODES.filter((c) => !(c in elsewhere))) expect(listed.get(code), code).toBe(STATUS_OF[code]);
    for (const [code, doc] of Object.entries(elsewhere)) {
      if (doc) expect(readFileSync(join(ROOT, 'docs', doc), 'utf8'), code).toContain(`${STATUS_OF[code as keyof typeof STATUS_OF]} \`${code}\``);
    }
  });
});

describe('start-up checks', () => {
  it.each([
    ['OPTMARK_PORT', '99999'],
    ['OPTMARK_PORT', 'http'],
    ['OPTMARK_POOL_SIZE', '0'],
    ['OPTMARK_MAX_INFLIGHT_BYTES', '2048'],
    ['OPTMARK_WARM_INFLIGHT_BYTES', String(512 * 1024 ** 2)], // more than the arena it keeps the start of
    ['OPTMARK_LOG_LEVEL', 'loud'],
    ['OPTMARK_ALLOW_UWS_FALLBACK', 'maybe'],
  ])('a bad %s (%s) stops serve with a message naming it', async (variable, value) => {
    const { code, output } = await TestServer.spawnOnce({ [variable]: value });
    expect(code).not.toBe(0);
    expect(output).toContain(`configuration error: ${variable}`);
    expect(output).not.toMatch(/^\s+at /m); // a message for the operator, not a stack trace
  });

  it('regression: a key, secret or certificate file the operator names that does not load stops serve at start, naming its variable', async () => {
    // Before: the server started; every verify then answered 503 fingerprint_unavailable "retry shortly"
    // (the secret), and the C2PA pair failed with a stack trace (exit 1).
    const missing = join(ROOT, 'no-such-dir', 'file');
    for (const [env, text] of [
      [{ OPTMARK_FINGERPRINT_SECRET_FILE: missing }, `OPTMARK_FINGERPRINT_SECRET_FILE: fingerprint secret file ${missing} does not exist`],
      [{ OPTMARK_SIGNING_KEY_FILE: ROOT }, `OPTMARK_SIGNING_KEY_FILE: ${ROOT} is a directory, not a file`],
      [{ OPTMARK_C2PA_CERT_FILE: missing, OPTMARK_C2PA_KEY_FILE: missing }, `OPTMARK_C2PA_CERT_FILE: ${missing} does not exist`],
      [{ OPTMARK_C2PA_CERT_FILE: missing }, 'OPTMARK_C2PA_KEY_FILE: not set, but OPTMARK_C2PA_CERT_FILE is: set both or neither'],
    ] as const) {
      const { code, output } = await TestServer.spawnOnce(env);
      expect(output, JSON.stringify(env)).toContain(`optmark: configuration error: ${text}\n`);
      expect(code).toBe(78);
      expect(output).not.toMatch(/^\s+at /m);
    }
  });

  it('refuses to run on the uWS JS fallback unless the operator opts in', async () => {
    const { code, output } = await TestServer.spawnOnce({ UWS_USE_FALLBACK: '1' });
    expect(code).not.toBe(0);
    expect(output).toContain('OPTMARK_ALLOW_UWS_FALLBACK=1');
    expect(output).not.toMatch(/"msg":"listening"/);
  });

  it('regression: serves requests on the fallback the operator opted into, says so, and stops cleanly', async () => {
    const server = await TestServer.start({ env: { UWS_USE_FALLBACK: '1', OPTMARK_ALLOW_UWS_FALLBACK: '1', OPTMARK_POOL_SIZE: '1' } });
    try {
      const r = await request(server, '/readyz');
      expect(r.json).toMatchObject({ status: 'ready', transport: 'uws-js-fallback' });
      expectConforms(r, 'get', '/readyz');
      expect(server.output).toMatch(/"level":"warn".*"transport":"uws-js-fallback"/);
      const { key } = await server.account();
      const a = await api(server, 'protect', key, small);
      expect(a.status).toBe(200);
      expect(sha256(Buffer.from(a.json.imageBase64, 'base64'))).toBe(a.json.sha256);
      expectError(await api(server, 'verify', undefined, small), 401, 'missing_api_key');
      expect(await server.stop('SIGINT')).toEqual({ code: 0, signal: null });
    } finally {
      await server.dispose();
    }
  });
});

describe('a pool of one worker with a queue of one', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_QUEUE_LENGTH: '1' } });
    ({ key } = await server.account());
  });
  afterAll(async () => {
    await server?.dispose();
  });

  it('503 overloaded with Retry-After once the worker is busy and the queue full; the others finish', async () => {
    const running = api(server, 'verify', key, slow);
    await server.readyzUntil('the first task to run', (r) => r.pool.running === 1);
    const queued = api(server, 'verify', key, slow);
    const r = await server.readyzUntil('the second task to wait', (x) => x.pool.queued === 1);
    expect(r.pool).toMatchObject({ threads: 1, running: 1, queued: 1 });
    const m = (await request(server, '/metrics')).body.toString();
    expect(metric(m, 'optmark_pool_queue_depth')).toBe(1);
    expect(metric(m, 'optmark_pool_running_tasks')).toBe(1);

    const refused = await api(server, 'verify', key, small);
    expectError(refused, 503, 'overloaded');
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(refused.headers.ratelimit).toBeTruthy();
    expectConforms(refused, 'post', '/api/v1/verify');

    for (const a of await Promise.all([running, queued])) {
      expect(a.status).toBe(200);
      expect(a.json.sha256).toBe(sha256(slow));
    }
    expect((await api(server, 'verify', key, small)).status).toBe(200);
  });

  it('a client that leaves while its image is processed frees its request slot and is not counted', async () => {
    const { name, key: k } = await server.account();
    const form = imageForm(slow, 'slow.png', 'image/png');
    const gone = await rawRequest(server.port, {
      path: '/api/v1/verify',
      headers: { Authorization: `Bearer ${k}`, 'Content-Type': form.contentType },
      body: form.body,
      // The whole body; hang up once its task runs, before the answer.
      abortAfter: form.body.length,
      onProgress: async (sent) => {
        if (sent === form.body.length) await server.readyzUntil('the task to run', (r) => r.pool.running === 1);
      },
    });
    expect(gone.status).toBe(0);
    await server.settled();
    expect((await server.usage(name)).verify.used).toBe(0);
    await server.readyzUntil('the worker to be free again', (r) => r.pool.running === 0);
    expect((await api(server, 'verify', key, small)).status).toBe(200);
  });

  it('SIGTERM: stops accepting, finishes the upload in flight, then exits 0', async () => {
    const image = await jpegOfSize(600_000);
    const kept = await openConnection(server.port);
    const upload = await uploadInFlight(server, key, image, 300_000);
    server.proc!.kill('SIGTERM');
    await waitFor('the listener to close', async () => ((await connectionRefused(server.port)) ? true : undefined));
    // A connection opened before the signal is still served, and hears that the server is not ready.
    const draining = await kept.get('/readyz');
    expect(draining.status).toBe(503);
    expect(draining.json).toMatchObject({ status: 'not ready', inflight: { requests: 1 } });
    expectConforms(draining, 'get', '/readyz');
    kept.close();
    expect(server.running).toBe(true);

    upload.release();
    const a = await upload.answer;
    expect(a.status).toBe(200);
    expect(a.json.sha256).toBe(sha256(image));
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.output).toMatch(/"msg":"stopped"/);
  });
});

describe('a one-worker pool with a 100 ms task deadline', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await TestServer.start({ env: { OPTMARK_POOL_SIZE: '1', OPTMARK_TASK_TIMEOUT_MS: '100', OPTMARK_SHUTDOWN_TIMEOUT_MS: '300' } });
    ({ key } = await server.account());
  });
  afterAll(async () => {
    await server?.dispose();
  });

  it('a task past the deadline is answered 422/503 with a JSON body, and a new worker takes over', async () => {
    const { name, key: k } = await server.account();
    const a = await api(server, 'verify', k, slow);
    expect([422, 503]).toContain(a.status);
    expectError(a, a.status, a.status === 422 ? 'processing_timeout' : 'overloaded');
    expectConforms(a, 'post', '/api/v1/verify');
    expect((await server.usage(name)).verify.used).toBe(0);
    // The worker that ran it was terminated and replaced: small images get through again. The
    // replacement's start-up counts against the first tasks' 100 ms, so those may still time out.
    const seen: Answer[] = [];
    await waitFor(
      'a request to succeed on the replacement worker',
      async () => {
        const b = await api(server, 'verify', key, small);
        seen.push(b);
        return b.status === 200 ? true : undefined;
      },
      30_000,
    );
    for (const b of seen.slice(0, -1)) expect(['processing_timeout', 'overloaded']).toContain(b.json.code);
    expect((await server.readyz()).pool.threads).toBe(1);
  });

  it('SIGTERM with an upload that never finishes: exits after the shutdown deadline', async () => {
    const stuck = await uploadInFlight(server, key, await jpegOfSize(200_000), 50_000);
    server.proc!.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.output).toMatch(/shutdown deadline passed/);
    stuck.release();
    expect((await stuck.answer).status).toBe(0);
  });
});
