/**
 * The JSON routes beside the API's two (the dashboard's, the vault's, the scans'): authenticated with the
 * bearer key like the API (401 with WWW-Authenticate, 403 for plans without API access), a small JSON
 * body for POST and PUT read through the API's intake (./intake.ts), or a bounded upload for a route that
 * takes one, and the handler's answer or its error as `{error, code}`.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { OptmarkError, toErrorShape } from '../errors.js';
import { checkQueryEncoding, wwwAuthenticate, type Account } from '../store/index.js';
import type { ApiDeps } from './api.js';
import { remoteAddress } from './head.js';
import { type BodyRules, Intake } from './intake.js';
import { type Exchange, exchangeOf, getAndHead, type Headers } from './respond.js';

/** Largest JSON body a dashboard route reads (a batch request is a few dozen bytes). */
export const MAX_JSON_BODY = 4096;

export interface Caller {
  account: Account;
  keyId: number;
}

export interface RouteRequest {
  authorization: string;
  query: URLSearchParams;
  host: string;
  param: string;
  contentType: string;
  /** The Range header, as sent. */
  range: string;
}

export type Answer = { status: number; body: string | Uint8Array; headers?: Headers };

export function observe(deps: ApiDeps, ex: Exchange, received = 0): void {
  deps.metrics.observe(ex.route, ex.status, Number(process.hrtime.bigint() - ex.started) / 1e9, received, ex.sent);
}

/** A dashboard JSON body: small, and read by the same intake as an upload (the same 413, 408 and 503). */
const JSON_RULES: BodyRules = {
  maxBytes: MAX_JSON_BODY,
  tooLarge: () => new OptmarkError('payload_too_large', `A dashboard request body may be at most ${MAX_JSON_BODY} bytes.`),
  malformed: 'invalid_request',
  nonEmpty: false,
};

/**
 * A dashboard JSON route: authenticates with the bearer key (the API's refusals: 401 with
 * WWW-Authenticate, 403 for plans without API access), reads a small JSON body for POST through the
 * API's intake (./intake.ts), and answers what `handler` returns, or its error as `{error, code}`.
 */
export function json(
  app: TemplatedApp,
  deps: ApiDeps,
  method: 'get' | 'post' | 'put' | 'del',
  path: string,
  handler: (caller: Caller, req: RouteRequest, body: Buffer | undefined) => Promise<Answer>,
  /** The body's rules for a route that takes more than a small JSON body (an upload). */
  bodyRules: BodyRules = JSON_RULES,
): void {
  const route =
    method === 'get'
      ? (handler: (res: HttpResponse, req: HttpRequest) => void) => getAndHead(app, path, handler)
      : method === 'post'
        ? app.post.bind(app, path)
        : method === 'put'
          ? app.put.bind(app, path)
          : app.del.bind(app, path);
  route((res, req) => {
    const ex = exchangeOf(res, req, path);
    const rawQuery = req.getQuery() ?? '';
    const request: RouteRequest = {
      authorization: req.getHeader('authorization'),
      query: new URLSearchParams(rawQuery),
      host: req.getHeader('host'),
      param: path.includes(':') ? (req.getParameter(0) ?? '') : '',
      contentType: req.getHeader('content-type'),
      range: req.getHeader('range'),
    };
    const contentLength = req.getHeader('content-length');
    const address = remoteAddress(res);
    // uWS hands the body only to a reader attached before this handler returns.
    const intake = method === 'post' || method === 'put' ? new Intake(ex, deps, bodyRules) : undefined;
    let received = 0;
    const run = async (): Promise<void> => {
      const auth = await deps.store.authenticate(request.authorization || undefined);
      if (!auth.ok) throw new OptmarkError(auth.code, auth.message);
      checkQueryEncoding(rawQuery); // bytes that are not UTF-8: 400 invalid_text (src/store/text.ts)
      let body: Buffer | undefined;
      if (intake) {
        intake.declare(contentLength);
        intake.admit(false, { account: auth.account.id, address });
        await intake.receive();
        body = intake.bytes();
        received = body.length;
      }
      const answer = await handler({ account: auth.account, keyId: auth.keyId }, request, body);
      const type: Headers = typeof answer.body === 'string' ? { 'Content-Type': 'application/json' } : {};
      await ex.send(answer.status, { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', ...type, ...answer.headers }, answer.body);
    };
    run()
      .catch((err: unknown) => {
        if (ex.aborted) return;
        const shape = toErrorShape(err);
        if (shape.code === 'internal_error') deps.log.error({ reqId: ex.id, err }, 'dashboard route failed');
        const headers: Headers = {};
        if (shape.code === 'missing_api_key' || shape.code === 'invalid_api_key') headers['WWW-Authenticate'] = wwwAuthenticate(shape.code);
        return ex.error(shape.code, shape.message, headers, { closeConnection: intake?.closeConnection() ?? false });
      })
      .finally(() => {
        received ||= intake?.received ?? 0;
        intake?.release();
        observe(deps, ex, received);
      });
  });
}
