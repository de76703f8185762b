/**
 * The Private Vault's routes (docs/vault.md, docs/openapi.json), on the JSON route flow of ./json-route.ts
 * (the API key, the same refusals). Another account's object is 404, never 403: the answer does not say
 * whether an id exists.
 *
 *   PUT    /api/v1/vault                      {"enabled": bool}
 *   GET    /api/v1/vault                      {enabled, usedBytes, limitBytes, objects}
 *   POST   /api/v1/vault/objects              multipart "image": 201 (200 when these bytes are kept already)
 *   GET    /api/v1/vault/objects              newest first; ?q=&name=&sha256=&record=&limit=&cursor=
 *   GET    /api/v1/vault/objects/:id          the object's metadata
 *   GET    /api/v1/vault/objects/:id/content  the bytes: Content-Type, Content-Disposition, Range (206, 416)
 *   DELETE /api/v1/vault/objects/:id          204, and the bytes are gone from storage
 */
import { buffer } from 'node:stream/consumers';
import type { TemplatedApp } from 'uWebSockets.js';
import { MULTIPART_SLACK_BYTES } from '../config.js';
import { OptmarkError } from '../errors.js';
import { detectFormat } from '../formats/index.js';
import { checkContentType } from '../pipeline/form-type.js';
import { contentDisposition } from '../pipeline/protect.js';
import { parseUpload } from '../pipeline/upload.js';
import { MAX_VAULT_PAGE, type VaultObject, type VaultObjectRow } from '../vault/rows.js';
import type { Vault } from '../vault/service.js';
import type { ApiDeps } from './api.js';
import type { BodyRules } from './intake.js';
import { parseTimeCursor, timeCursor } from './cursor.js';
import { type Answer, json, observe } from './json-route.js';
import { exchangeOf } from './respond.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function objectView(o: VaultObjectRow): VaultObject {
  return { id: o.id, name: o.name, sha256: o.sha256, bytes: o.bytes, mimeType: o.mimeType, createdAt: o.createdAt, kind: o.kind, record: o.record };
}

const afterOf = (c: { time: string; id: string }) => ({ createdAt: c.time, id: c.id });

const ok = (value: unknown, status = 200): Answer => ({ status, body: JSON.stringify(value) });

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` over an object of `size` bytes; undefined for none; a 416 for one it cannot serve. */
export function parseRange(header: string, size: number): { start: number; end: number } | undefined {
  const h = header.trim();
  if (!h) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(h);
  // Several ranges, or another unit: served whole, as RFC 9110 allows a server to.
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  const unsatisfiable = () => Object.assign(new OptmarkError('range_not_satisfiable', `The object has ${size} bytes; ${h} asks for none of them.`), { size });
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0 || size === 0) throw unsatisfiable();
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || (m[2] !== '' && Number(m[2]) < start)) throw unsatisfiable();
  return { start, end };
}

function parseEnabled(body: Buffer | undefined): boolean {
  let v: unknown;
  try {
    v = JSON.parse(body?.toString('utf8') || 'null');
  } catch {
    throw new OptmarkError('invalid_request', 'The body must be JSON: {"enabled": true|false}.');
  }
  if (
    typeof v !== 'object' ||
    v === null ||
    Array.isArray(v) ||
    Object.keys(v).some((k) => k !== 'enabled') ||
    typeof (v as { enabled?: unknown }).enabled !== 'boolean'
  ) {
    throw new OptmarkError('invalid_request', 'The body must be {"enabled": true|false}.');
  }
  return (v as { enabled: boolean }).enabled;
}

export function registerVault(app: TemplatedApp, deps: ApiDeps, vault: Vault): void {
  const uploadRules: BodyRules = {
    maxBytes: deps.maxUploadBytes + MULTIPART_SLACK_BYTES,
    tooLarge: () => new OptmarkError('payload_too_large', `A vault upload may be at most ${deps.maxUploadBytes} bytes.`),
    malformed: 'malformed_multipart',
    nonEmpty: true,
  };

  const summary = async (accountId: number) => {
    const s = await vault.state(accountId);
    return { enabled: s.enabled, usedBytes: s.usedBytes, limitBytes: s.limit, objects: s.objects };
  };

  const find = async (accountId: number, id: string): Promise<VaultObjectRow> => {
    const o = UUID.test(id) ? await vault.get(accountId, id) : undefined;
    if (!o) throw new OptmarkError('not_found', 'No vault object with that id for this account.');
    return o;
  };

  json(app, deps, 'get', '/api/v1/vault', async (caller) => ok(await summary(caller.account.id)));

  json(app, deps, 'put', '/api/v1/vault', async (caller, _req, body) => {
    await vault.setEnabled(caller.account.id, parseEnabled(body));
    return ok(await summary(caller.account.id));
  });

  json(
    app,
    deps,
    'post',
    '/api/v1/vault/objects',
    async (caller, req, body) => {
      checkContentType(req.contentType);
      const image = await parseUpload(body!, req.contentType, deps.maxUploadBytes);
      const format = detectFormat(image.bytes);
      if (!format) throw new OptmarkError('unsupported_format', 'The vault keeps JPEG, PNG and WebP images.');
      const name = (image.filename ?? '').split(/[/\\]/).pop()?.slice(0, 255) || `image.${format.name === 'jpeg' ? 'jpg' : format.name}`;
      const { object, created } = await vault.put(caller.account.id, { bytes: image.bytes, name, mimeType: format.mimeType, kind: 'original' });
      return ok(objectView(object), created ? 201 : 200);
    },
    uploadRules,
  );

  json(app, deps, 'get', '/api/v1/vault/objects', async (caller, req) => {
    const q = req.query;
    const limit = Number(q.get('limit') ?? 50);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_VAULT_PAGE)
      throw new OptmarkError('invalid_query', `"limit" must be a whole number from 1 to ${MAX_VAULT_PAGE}.`);
    const sha256 = q.get('sha256') ?? undefined;
    if (sha256 !== undefined && !/^[0-9a-f]{64}$/.test(sha256)) throw new OptmarkError('invalid_query', '"sha256" must be 64 lowercase hex digits.');
    const cursor = q.get('cursor');
    const list = await vault.list(caller.account.id, {
      q: q.get('q') || undefined,
      name: q.get('name') || undefined,
      sha256,
      record: q.get('record') || undefined,
      after: cursor === null ? undefined : afterOf(parseTimeCursor(cursor, 'invalid_query', UUID)),
      limit: limit + 1,
    });
    const page = list.slice(0, limit);
    const last = page[page.length - 1];
    return ok({ objects: page.map(objectView), next: list.length > limit && last ? timeCursor(last.createdAt, last.id) : null });
  });

  json(app, deps, 'get', '/api/v1/vault/objects/:id', async (caller, req) => ok(objectView(await find(caller.account.id, req.param))));

  json(app, deps, 'get', '/api/v1/vault/objects/:id/content', async (caller, req) => {
    const o = await find(caller.account.id, req.param);
    let range: { start: number; end: number } | undefined;
    try {
      range = parseRange(req.range, o.bytes);
    } catch (err) {
      if ((err as OptmarkError).code === 'range_not_satisfiable') {
        return {
          status: 416,
          body: JSON.stringify({ error: (err as Error).message, code: 'range_not_satisfiable' }),
          headers: { 'Content-Range': `bytes */${o.bytes}`, 'Content-Type': 'application/json' },
        };
      }
      throw err;
    }
    // The answer is built whole (an object is at most one upload, OPTMARK_MAX_UPLOAD_BYTES).
    const opened = await vault.read(caller.account.id, o, range);
    const headers: Record<string, string> = {
      'Content-Type': o.mimeType,
      'Content-Disposition': contentDisposition(o.name),
      'Accept-Ranges': 'bytes',
      ETag: `"${o.sha256}"`,
    };
    if (range) headers['Content-Range'] = `bytes ${opened.start}-${opened.end}/${o.bytes}`;
    return { status: range ? 206 : 200, body: await buffer(opened.body), headers };
  });

  json(app, deps, 'del', '/api/v1/vault/objects/:id', async (caller, req) => {
    if (!UUID.test(req.param) || !(await vault.delete(caller.account.id, req.param)))
      throw new OptmarkError('not_found', 'No vault object with that id for this account.');
    return { status: 204, body: '' };
  });

  // A known route with another method is 405 with Allow, not "No route".
  for (const [path, allow] of [
    ['/api/v1/vault', 'GET, HEAD, PUT'],
    ['/api/v1/vault/objects', 'GET, HEAD, POST'],
    ['/api/v1/vault/objects/:id', 'GET, HEAD, DELETE'],
    ['/api/v1/vault/objects/:id/content', 'GET, HEAD'],
  ] as const) {
    app.any(path, (res, req) => {
      const ex = exchangeOf(res, req, path);
      void ex.error('method_not_allowed', `${path} accepts ${allow} only.`, { Allow: allow }).then(() => observe(deps, ex));
    });
  }
}
