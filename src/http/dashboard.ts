/**
 * The web dashboard's routes: the page itself (GET / and its hashed assets, with a strict
 * Content-Security-Policy, long caching and precompressed transfer) and its API under
 * /api/v1/dashboard/ (docs/openapi.json, tag "dashboard"). Every API route takes the same bearer key
 * as the public API and refuses the same plans; the image route runs the API's own request flow
 * (handleApi, with an extension for the batch slot and the record) and the layer path of `optmark mark`.
 */
import { keptHash } from '../vault/recognition.js';
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { type Assets, chooseEncoding } from '../dashboard/assets.js';
import { recordsCsv, recordsJson } from '../dashboard/export.js';
import type { ReceiptMaker } from '../dashboard/receipts.js';
import { OptmarkError } from '../errors.js';
import { MAX_BATCH_SIZE, type Batch, type BatchSpec, type MarkRecord, type RecordCursor, type RecordMatch, type Store } from '../store/index.js';
import { handleApi, type ApiDeps, type ApiExtension } from './api.js';
import type { Vault } from '../vault/service.js';
import { parseTimeCursor, timeCursor } from './cursor.js';
import { type Answer, type Caller, json, observe } from './json-route.js';
import { exchangeOf, getAndHead, type Headers } from './respond.js';

export interface DashboardDeps extends ApiDeps {
  assets: Assets;
  /** Makes the PDF receipts off the event loop. */
  receipts: ReceiptMaker;
  /** Worker threads: the page runs a few more uploads than this at once, so no worker waits for bytes. */
  poolSize: number;
  /** The Private Vault, for images marked with `?vault=keep` (docs/vault.md). */
  vault?: Vault;
}

/**
 * The page's policy: scripts and styles from this origin only (no inline code of either kind), images
 * from this origin and the page's own blob: URLs (thumbnails), requests to this origin only.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS: Headers = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** Most records one export holds. */
const MAX_EXPORT = 100_000;
/** Uploads the page runs at once at most, whatever the pool size. */
const MAX_PAGE_CONCURRENCY = 8;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Adds the dashboard's routes to the app (before its catch-all route). */
export function registerDashboard(app: TemplatedApp, deps: DashboardDeps): void {
  const { store } = deps;
  const records = store.dashboard;

  // The page.
  const page = (res: HttpResponse, req: HttpRequest, path: string): void => {
    const ex = exchangeOf(res, req, path === '/' ? '/' : '/assets');
    const accept = req.getHeader('accept-encoding');
    const match = req.getHeader('if-none-match');
    const asset = deps.assets.get(path);
    let sent: Promise<boolean>;
    if (!asset) {
      sent = deps.assets.built
        ? ex.error('not_found', `No dashboard file ${path}.`)
        : ex.send(503, { 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': '60' }, 'The dashboard was not built: run npm run build.\n');
    } else {
      const headers: Headers = {
        ...PAGE_HEADERS,
        'Content-Type': asset.type,
        ETag: asset.etag,
        Vary: 'Accept-Encoding',
        'Cache-Control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      };
      if (match && match === asset.etag) sent = ex.send(304, headers, '');
      else {
        const encoding = chooseEncoding(asset, accept);
        if (encoding !== 'identity') headers['Content-Encoding'] = encoding;
        sent = ex.send(200, headers, asset.bodies[encoding]!);
      }
    }
    void sent.then(() => observe(deps, ex));
  };
  getAndHead(app, '/', (res, req) => page(res, req, '/'));
  getAndHead(app, '/index.html', (res, req) => page(res, req, '/'));
  getAndHead(app, '/assets/*', (res, req) => page(res, req, req.getUrl()));

  // The page's API.
  json(app, deps, 'get', '/api/v1/dashboard/account', async (caller) => {
    const now = new Date();
    const [protect, verify] = await Promise.all([store.quotaState(caller.account.id, 'protect', now), store.quotaState(caller.account.id, 'verify', now)]);
    const month = now.toISOString().slice(0, 7);
    const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
    const counter = (s: typeof protect) => ({ used: s.used, limit: s.limit, remaining: s.remaining });
    return ok({
      account: { name: caller.account.name, plan: caller.account.plan },
      key: { prefix: await records.keyPrefix(caller.keyId) },
      usage: { month, resetsAt, protect: counter(protect), verify: counter(verify) },
      limits: {
        batchSize: MAX_BATCH_SIZE,
        maxUploadBytes: deps.maxUploadBytes,
        concurrency: Math.min(MAX_PAGE_CONCURRENCY, deps.poolSize + 1),
      },
    });
  });

  json(app, deps, 'post', '/api/v1/dashboard/batches', async (caller, _req, body) => {
    const spec = parseBatchSpec(body);
    const batch = await records.openBatch(caller.account.id, await records.keyPrefix(caller.keyId), spec);
    return { status: 201, body: JSON.stringify(batchView(batch, [])) };
  });

  json(app, deps, 'get', '/api/v1/dashboard/batches/:id', async (caller, req) => {
    const batch = await findBatch(caller, req.param);
    return ok(batchView(batch, await records.batchRecords(caller.account.id, batch.id)));
  });

  json(app, deps, 'get', '/api/v1/dashboard/batches/:id/receipt', async (caller, req) => {
    const batch = await findBatch(caller, req.param);
    const pdf = await deps.receipts.make({
      batch,
      records: await records.batchRecords(caller.account.id, batch.id),
      account: caller.account.name,
      issuer: req.host || 'optmark',
      now: new Date(),
    });
    return {
      status: 200,
      body: pdf,
      headers: { 'Content-Type': 'application/pdf', 'Content-Disposition': `attachment; filename="optmark-receipt-${batch.id}.pdf"` },
    };
  });

  json(app, deps, 'get', '/api/v1/dashboard/records', async (caller, req) => {
    const q = req.query.get('q') ?? undefined;
    const before = req.query.get('before') ?? undefined;
    if (before !== undefined && Number.isNaN(Date.parse(before))) throw new OptmarkError('invalid_request', '"before" must be an ISO date-time.');
    const cursor = req.query.get('cursor');
    const after = cursor === null ? undefined : parseCursor(cursor);
    const limit = Number(req.query.get('limit') ?? 50);
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new OptmarkError('invalid_request', '"limit" must be a whole number from 1 to 500.');
    const list = await records.records(caller.account.id, { q, before, after, limit: limit + 1 });
    const more = list.length > limit;
    const page = list.slice(0, limit);
    return ok({ records: page, next: more ? cursorOf(page[page.length - 1]!) : null });
  });

  json(app, deps, 'get', '/api/v1/dashboard/records/export', async (caller, req) => {
    const format = req.query.get('format') ?? 'csv';
    if (format !== 'csv' && format !== 'json') throw new OptmarkError('invalid_request', '"format" must be csv or json.');
    const q = req.query.get('q') ?? undefined;
    const all: MarkRecord[] = [];
    let after: RecordCursor | undefined;
    while (all.length < MAX_EXPORT) {
      const page = await records.records(caller.account.id, { q, after, limit: 500 });
      all.push(...page);
      if (page.length < 500) break;
      after = page[page.length - 1]!;
    }
    const day = new Date().toISOString().slice(0, 10);
    return {
      status: 200,
      body: format === 'csv' ? recordsCsv(all) : recordsJson(all),
      headers: {
        'Content-Type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json',
        'Content-Disposition': `attachment; filename="optmark-records-${day}.${format}"`,
      },
    };
  });

  // One image of a batch: the API's flow, with the batch slot taken after authentication and the record
  // stored before the answer goes out (and removed again when the answer never reaches the client).
  app.post('/api/v1/dashboard/batches/:id/images', (res, req) => {
    const batchId = req.getParameter(0) ?? '';
    // ?vault=keep: the original and the marked file go to the account's Private Vault, linked to the record.
    const vaultQuery = new URLSearchParams(req.getQuery() ?? '').get('vault');
    const extension: ApiExtension = {
      route: '/api/v1/dashboard/batches/:id/images',
      admit: async ({ account, keyId }) => {
        if (!UUID.test(batchId)) throw new OptmarkError('not_found', 'No open batch with that id.');
        if (vaultQuery !== null && vaultQuery !== 'keep')
          throw new OptmarkError('invalid_query', '"vault" takes one value, keep: the original and the marked file are kept in the Private Vault.');
        const keep = vaultQuery === 'keep';
        const vault = deps.vault;
        if (keep && (!vault || !(await vault.state(account.id)).enabled))
          throw new OptmarkError('vault_disabled', "?vault=keep needs the account's Private Vault on (Settings, or PUT /api/v1/vault).");
        const slot = await records.takeSlot(account.id, batchId);
        if (!slot.ok) {
          if (slot.reason === 'full')
            throw new OptmarkError('batch_full', 'This batch already holds all the images it was opened for (at most 25); open a new batch.');
          throw new OptmarkError(
            'not_found',
            slot.reason === 'expired' ? 'This batch has expired (batches take images for 24 hours); open a new one.' : 'No open batch with that id.',
          );
        }
        const batch = slot.batch;
        const recordId = randomUUID();
        let recorded = false;
        // Vault objects this mark created (never ones kept before): removed again when the answer is not delivered.
        const keptHere: string[] = [];
        return {
          task: (input, contentType) => ({
            kind: 'dashboard-mark',
            input,
            contentType,
            provenance: batch.provenance,
            fingerprint: batch.fingerprint,
            tdmrep: batch.tdmrep,
            contentCredentials: batch.contentCredentials,
            batchId,
            recordId,
            keep,
          }),
          answered: async (result, body) => {
            const m = result.mark;
            if (!m) throw new Error('the dashboard mark came back without its record');
            if (keep && vault && m.kept) {
              const kinds = [
                { bytes: m.kept.original, name: m.originalName, kind: 'original' as const },
                { bytes: m.kept.marked, name: m.filename, kind: 'marked' as const },
              ];
              const kept = m.kept;
              const puts = await Promise.allSettled(kinds.map((k) => vault.put(account.id, { ...k, mimeType: kept.originalMime, record: recordId })));
              for (const p of puts) if (p.status === 'fulfilled' && p.value.created) keptHere.push(p.value.object.id);
              const failed = puts.find((p) => p.status === 'rejected');
              if (failed) throw (failed as PromiseRejectedResult).reason;
            }
            await records.addRecord(account.id, {
              id: recordId,
              batchId,
              sha256: m.sha256,
              originalName: m.originalName,
              producedName: m.filename,
              mimeType: m.mimeType,
              bytes: m.bytes,
              layers: m.layers,
              keyPrefix: batch.keyPrefix || (await records.keyPrefix(keyId)),
              provenanceKeyId: m.provenanceKeyId,
              markedAt: m.markedAt,
            });
            recorded = true;
            return body;
          },
          settle: async (delivered) => {
            if (delivered) return;
            for (const id of keptHere) await vault?.delete(account.id, id);
            if (recorded) await records.removeRecord(recordId);
            await records.giveSlot(batchId);
          },
        };
      },
    };
    handleApi(deps, 'protect', res, req, extension);
  });

  // Every GET route answers HEAD too (getAndHead).
  for (const [path, allow] of [
    ['/', 'GET, HEAD'],
    ['/index.html', 'GET, HEAD'],
    ['/assets/*', 'GET, HEAD'],
    ['/api/v1/dashboard/account', 'GET, HEAD'],
    ['/api/v1/dashboard/batches', 'POST'],
    ['/api/v1/dashboard/batches/:id', 'GET, HEAD'],
    ['/api/v1/dashboard/batches/:id/images', 'POST'],
    ['/api/v1/dashboard/batches/:id/receipt', 'GET, HEAD'],
    ['/api/v1/dashboard/records', 'GET, HEAD'],
    ['/api/v1/dashboard/records/export', 'GET, HEAD'],
  ] as const) {
    const route = path === '/' || path === '/index.html' ? '/' : path === '/assets/*' ? '/assets' : path;
    const shown = path === '/assets/*' ? '/assets/' : path;
    app.any(path, (res, req) => {
      const ex = exchangeOf(res, req, route);
      void ex.error('method_not_allowed', `${shown} accepts ${allow.replace(', ', ' and ')} only.`, { Allow: allow }).then(() => observe(deps, ex));
    });
  }

  async function findBatch(caller: Caller, id: string) {
    const batch = UUID.test(id) ? await records.batch(caller.account.id, id) : undefined;
    if (!batch) throw new OptmarkError('not_found', 'No batch with that id for this account.');
    return batch;
  }
}

/**
 * /api/v1/verify with the dashboard's records: when the uploaded bytes are exactly an image the
 * dashboard marked for this account, the answer gains `record` (when, from which file, which layers,
 * which key); otherwise `record` is null. An additive field; the contract's fields stay as they are.
 */
export function verifyWithRecords(store: Store): ApiExtension {
  return {
    route: '/api/v1/verify',
    idempotent: true,
    admit: async ({ account }) => ({
      answered: async (result, body) => {
        const withRec = withField(body, 'record', await recordField(store, account.id, body));
        // ?vault=match: the worker hashed the picture; the account's originals it looks like.
        if (result.perceptualHash === undefined) return withRec;
        const hash = keptHash(result.perceptualHash);
        return withField(withRec, 'vault', hash ? await store.vault.vaultMatches(account.id, hash) : []);
      },
      settle: async () => {},
    }),
  };
}

/** The `record` field for a verify body: the newest record whose SHA-256 is the body's `sha256`. */
async function recordField(store: Store, accountId: number, body: Uint8Array): Promise<RecordMatch | null> {
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  const sha = /"sha256":"([0-9a-f]{64})"/.exec(text)?.[1];
  const r = sha ? await store.dashboard.recordBySha256(accountId, sha) : undefined;
  if (!r) return null;
  return {
    id: r.id,
    batchId: r.batchId,
    markedAt: r.markedAt,
    originalName: r.originalName,
    producedName: r.producedName,
    layers: r.layers,
    keyPrefix: r.keyPrefix,
    provenanceKeyId: r.provenanceKeyId,
  };
}

/** The JSON object in `body` with `"key": value` added before its closing brace. */
function withField(body: Uint8Array, key: string, value: unknown): Uint8Array {
  let end = body.length - 1;
  while (end > 0 && body[end] !== 0x7d) end--; // '}'
  if (end <= 0) return body;
  const tail = Buffer.from(`,${JSON.stringify(key)}:${JSON.stringify(value)}}`, 'utf8');
  return Buffer.concat([body.subarray(0, end), tail]);
}

/**
 * The history's page cursor: the last record's time and id (records of one millisecond are ordered by
 * id), as one opaque base64url string the page hands back as `cursor`.
 */
export function cursorOf(record: RecordCursor): string {
  return timeCursor(record.markedAt, record.id);
}

/** The record place a `cursor` names; a 400 for anything this server did not hand out. */
export function parseCursor(cursor: string): RecordCursor {
  const { time, id } = parseTimeCursor(cursor, 'invalid_request', /^[0-9A-Za-z-]{1,64}$/);
  return { markedAt: time, id };
}

function ok(value: unknown): Answer {
  return { status: 200, body: JSON.stringify(value) };
}

function batchView(batch: Omit<Batch, 'keyPrefix'>, recs: MarkRecord[]) {
  return {
    id: batch.id,
    size: batch.size,
    layers: { provenance: batch.provenance, fingerprint: batch.fingerprint, tdmrep: batch.tdmrep, contentCredentials: batch.contentCredentials },
    used: batch.used,
    createdAt: batch.createdAt,
    records: recs,
  };
}

const BATCH_SHAPE = '{"size": 1-25, "provenance", "fingerprint", "tdmrep", "contentCredentials": true|false}';
const LAYER_FIELDS = ['provenance', 'fingerprint', 'tdmrep', 'contentCredentials'] as const;

/** `{"size": 1..25, "provenance": bool, "fingerprint": bool, "tdmrep": bool, "contentCredentials": bool}` (layers absent: off) */
function parseBatchSpec(body: Buffer | undefined): Required<BatchSpec> {
  let value: unknown;
  try {
    value = JSON.parse(body?.toString('utf8') || 'null');
  } catch {
    throw new OptmarkError('invalid_request', `The body must be JSON: ${BATCH_SHAPE}.`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new OptmarkError('invalid_request', `The body must be a JSON object: ${BATCH_SHAPE}.`);
  }
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) {
    if (key !== 'size' && !(LAYER_FIELDS as readonly string[]).includes(key)) throw new OptmarkError('invalid_request', `Unknown field "${key}".`);
  }
  const { size } = v;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1)
    throw new OptmarkError('invalid_request', '"size" must be a whole number of images from 1 to 25.');
  if (size > MAX_BATCH_SIZE) throw new OptmarkError('batch_too_large', `A batch holds at most ${MAX_BATCH_SIZE} images; this one asked for ${size}.`);
  const [provenance, fingerprint, tdmrep, contentCredentials] = LAYER_FIELDS.map((k) => v[k] ?? false);
  if (![provenance, fingerprint, tdmrep, contentCredentials].every((f) => typeof f === 'boolean'))
    throw new OptmarkError('invalid_request', '"provenance", "fingerprint", "tdmrep" and "contentCredentials" must be true or false.');
  return { size, provenance, fingerprint, tdmrep, contentCredentials } as Required<BatchSpec>;
}
