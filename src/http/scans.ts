/**
 * The scans API (docs/scans.md, docs/openapi.json), with the dashboard's JSON routes' authentication
 * (./dashboard.ts json: the bearer API key):
 *
 *   POST   /api/v1/scans               {source, options}: 202 with the scan (429 scan_limit_exceeded past the day's)
 *   GET    /api/v1/scans               the account's scans, newest first (?cursor=&limit=)
 *   GET    /api/v1/scans/{id}          one scan
 *   GET    /api/v1/scans/{id}/results  its items: JSON pages (?cursor=&limit=), ?format=csv or jsonl: all
 *   DELETE /api/v1/scans/{id}          cancels it
 *
 * Another account's scan is 404. The work is the runner's (src/scans/jobs/runner.ts).
 */
import { randomUUID } from 'node:crypto';
import type { TemplatedApp } from 'uWebSockets.js';
import { csvField } from '../dashboard/export.js';
import { OptmarkError } from '../errors.js';
import { isOurs } from '../scans/analyse.js';
import { type ScanOptions, type ScanRow, nextDay } from '../scans/jobs/store.js';
import { MAX_PER_HOST_DELAY_MS } from '../scans/limits.js';
import type { SourceType } from '../scans/sources/index.js';
import { ScanError, type ScanItem, type ScanLimits } from '../scans/types.js';
import type { ApiDeps } from './api.js';
import { type Answer, type Caller, json, type RouteRequest as Request } from './json-route.js';

export interface ScanApiDeps extends ApiDeps, ScanRoutes {}

export interface ScanRoutes {
  scanDailyLimit: number;
  scanServiceDailyLimit: number;
  scanAllowLocal: boolean;
  /** The clock (epoch ms) the daily counts go by; tests move it. */
  now: () => number;
  /** A scan was created: the runner looks for work. */
  created(): void;
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 1000;
const EXPORT_PAGE = 1000;
const LIMIT_KEYS: readonly (keyof ScanLimits)[] = [
  'maxImages',
  'maxBytes',
  'maxWallMs',
  'maxImageBytes',
  'maxRedirects',
  'perHostConcurrency',
  'perHostDelayMs',
  'maxHtmlBytes',
  'maxPages',
  'maxDepth',
  'connectTimeoutMs',
  'headersTimeoutMs',
  'bodyTimeoutMs',
];
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** `vaultOriginal` and `vaultName`: the nearest of the account's vault originals the picture looks like. */
const CSV_COLUMNS = [
  'location',
  'sha256',
  'format',
  'optedOut',
  'signals',
  'servedSignals',
  'ours',
  'record',
  'vaultOriginal',
  'vaultName',
  'errorCode',
  'errorMessage',
];

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** A scan as the API shows it. */
export function scanView(s: ScanRow): Record<string, unknown> {
  return {
    id: s.id,
    state: s.state,
    source: s.source,
    options: s.options,
    createdAt: iso(s.createdAt),
    startedAt: iso(s.startedAt),
    finishedAt: iso(s.finishedAt),
    progress: s.progress,
    counts: s.counts,
    error: s.error,
  };
}

const ok = (status: number, value: unknown): Answer => ({ status, body: JSON.stringify(value) });

export function registerScans(app: TemplatedApp, deps: ScanApiDeps): void {
  const scans = deps.store.scans;

  async function find(caller: Caller, id: string): Promise<ScanRow> {
    const scan = ID.test(id) ? await scans.get(caller.account.id, id) : undefined;
    if (!scan) throw new OptmarkError('not_found', 'No scan with that id for this account.');
    return scan;
  }

  json(app, deps, 'post', '/api/v1/scans', async (caller, _req, body): Promise<Answer> => {
    const { source, options } = await scanRequest(body, deps.scanAllowLocal);
    const now = deps.now();
    const r = await scans.create(
      { id: randomUUID(), accountId: caller.account.id, source, options, now },
      { account: deps.scanDailyLimit, service: deps.scanServiceDailyLimit },
    );
    if (!r.ok) {
      const resetsAt = nextDay(now);
      const retryAfter = Math.max(1, Math.ceil((resetsAt - now) / 1000));
      return {
        status: 429,
        headers: { 'Retry-After': String(retryAfter) },
        body: JSON.stringify({
          error: `This account started its ${deps.scanDailyLimit} scans for today (UTC); the count resets at ${iso(resetsAt)}.`,
          code: 'scan_limit_exceeded',
          resetsAt: iso(resetsAt),
        }),
      };
    }
    deps.created();
    return { ...ok(202, scanView(r.scan)), headers: { Location: `/api/v1/scans/${r.scan.id}` } };
  });

  json(app, deps, 'get', '/api/v1/scans', async (caller, req) => {
    const limit = pageLimit(req);
    const cursor = req.query.get('cursor');
    const after = cursor ? listCursor(cursor) : undefined;
    const rows = await scans.list(caller.account.id, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const next = rows.length > limit && last ? Buffer.from(JSON.stringify([last.createdAt, last.id])).toString('base64url') : null;
    return ok(200, { scans: page.map(scanView), nextCursor: next });
  });

  json(app, deps, 'get', '/api/v1/scans/:id', async (caller, req) => ok(200, scanView(await find(caller, req.param))));

  json(app, deps, 'del', '/api/v1/scans/:id', async (caller, req) => {
    await find(caller, req.param);
    const scan = await scans.cancel(caller.account.id, req.param, deps.now());
    if (!scan) throw new OptmarkError('not_found', 'No scan with that id for this account.');
    return ok(200, scanView(scan));
  });

  json(app, deps, 'get', '/api/v1/scans/:id/results', async (caller, req) => {
    const scan = await find(caller, req.param);
    const format = req.query.get('format') ?? 'json';
    if (format === 'csv' || format === 'jsonl') return exported(scan, format);
    if (format !== 'json') throw new OptmarkError('invalid_query', `format=${JSON.stringify(format).slice(1, -1)} is not accepted: json, csv or jsonl.`);
    const limit = pageLimit(req);
    const cursor = req.query.get('cursor');
    const from = cursor === null ? 0 : Number(cursor);
    if (!Number.isSafeInteger(from) || from < 0 || (cursor !== null && !/^\d+$/.test(cursor)))
      throw new OptmarkError('invalid_query', 'cursor is not one this route gave.');
    const rows = await scans.items(scan.id, from, limit + 1);
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? String(rows[limit]!.index) : null;
    return ok(200, { state: scan.state, items: page.map((r) => ({ index: r.index, ...r.item })), nextCursor: next });
  });

  /** Every item of the scan as CSV or JSON Lines (read from the store a page at a time). */
  async function exported(scan: ScanRow, format: 'csv' | 'jsonl'): Promise<Answer> {
    const lines: string[] = format === 'csv' ? [CSV_COLUMNS.join(',')] : [];
    for (let from = 0; ; ) {
      const rows = await scans.items(scan.id, from, EXPORT_PAGE);
      for (const r of rows) lines.push(format === 'csv' ? csvRow(r.item) : JSON.stringify({ index: r.index, ...r.item }));
      if (rows.length < EXPORT_PAGE) break;
      from = rows.at(-1)!.index + 1;
    }
    const body = lines.length > 0 ? `${lines.join(format === 'csv' ? '\r\n' : '\n')}${format === 'csv' ? '\r\n' : '\n'}` : '';
    const type = format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson';
    return {
      status: 200,
      body,
      headers: { 'Content-Type': type, 'Content-Disposition': `attachment; filename="scan-${scan.id}.${format}"` },
    };
  }
}

function csvRow(item: ScanItem): string {
  return [
    item.location,
    item.sha256,
    item.format,
    String(item.optedOut),
    item.signals.join(' '),
    item.servedSignals.join(' '),
    String(item.error === null && isOurs(item)),
    item.record?.id ?? null,
    item.vault?.[0]?.id ?? null,
    item.vault?.[0]?.name ?? null,
    item.error?.code ?? null,
    item.error?.message ?? null,
  ]
    .map(csvField)
    .join(',');
}

function pageLimit(req: Request): number {
  const raw = req.query.get('limit');
  if (raw === null) return DEFAULT_PAGE;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > MAX_PAGE) throw new OptmarkError('invalid_query', `limit must be a whole number from 1 to ${MAX_PAGE}.`);
  return n;
}

function listCursor(raw: string): { createdAt: number; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof createdAt === 'number' && Number.isSafeInteger(createdAt) && typeof id === 'string' && ID.test(id)) return { createdAt, id };
  } catch {}
  throw new OptmarkError('invalid_query', 'cursor is not one this route gave.');
}

/** The POST body checked: a source the server scans, options it knows (limits only as whole numbers). */
export async function scanRequest(body: Buffer | undefined, allowLocal: boolean): Promise<{ source: string; options: ScanOptions }> {
  // Loaded on first use: the sources (and their parsers) cost the server's start nothing.
  const { SOURCE_TYPES, parseScanSource } = await import('../scans/sources/index.js');
  let value: unknown;
  try {
    value = JSON.parse(body?.toString('utf8') || 'null');
  } catch {
    throw new OptmarkError('invalid_request', 'The body must be JSON: {"source": "<url>", "options": {...}}.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new OptmarkError('invalid_request', 'The body must be a JSON object: {"source": "<url>", "options": {...}}.');
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v))
    if (key !== 'source' && key !== 'options')
      throw new OptmarkError('invalid_request', `Unknown field ${JSON.stringify(key)}: the body has "source" and "options".`);
  const raw = v.options ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new OptmarkError('invalid_request', '"options" must be an object.');
  const options: ScanOptions = {};
  for (const [key, val] of Object.entries(raw as Record<string, unknown>)) {
    if (key === 'type') {
      if (!SOURCE_TYPES.includes(val as SourceType)) throw new OptmarkError('invalid_request', `"options.type" is one of ${SOURCE_TYPES.join(', ')}.`);
      options.type = val as SourceType;
    } else if (key === 'followLinks') {
      if (typeof val !== 'boolean') throw new OptmarkError('invalid_request', '"options.followLinks" must be true or false.');
      options.followLinks = val;
    } else if ((LIMIT_KEYS as readonly string[]).includes(key)) {
      if (key === 'perHostDelayMs' && (typeof val !== 'number' || !Number.isSafeInteger(val) || val < 0 || val > MAX_PER_HOST_DELAY_MS))
        throw new OptmarkError(
          'invalid_request',
          `"options.perHostDelayMs" must be a whole number up to ${MAX_PER_HOST_DELAY_MS} (it may only raise the server's delay).`,
        );
      if (typeof val !== 'number' || !Number.isSafeInteger(val) || val < 0)
        throw new OptmarkError('invalid_request', `"options.${key}" must be a whole number (it may only lower the server's limit).`);
      options[key as keyof ScanLimits] = val;
    } else throw new OptmarkError('invalid_request', `Unknown option ${JSON.stringify(key)}.`);
  }
  let parsed;
  try {
    parsed = parseScanSource(v.source, options.type);
  } catch (err) {
    if (err instanceof ScanError) throw new OptmarkError('invalid_source', err.message);
    throw err;
  }
  if (parsed.kind === 'local' && !allowLocal)
    throw new OptmarkError('local_source_not_allowed', 'This server does not scan local folders, files or file:// URLs (OPTMARK_SCAN_ALLOW_LOCAL is off).');
  return { source: v.source as string, options };
}
