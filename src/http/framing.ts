/**
 * Request framing (RFC 9112 6.1 and 6.3). uWebSockets.js frames a body by the first Content-Length header
 * it finds and takes any Transfer-Encoding that names chunked as chunked, so `Content-Length: 0` then
 * `Content-Length: 37` made the next 37 bytes a second request, and `Transfer-Encoding: chunked, identity`
 * was read as chunked. Behind a proxy that frames by the other header, that is request smuggling. Every
 * route's handler first looks at the raw headers (req.forEach, the one view of repeated fields) and a
 * request whose framing is not one plain Content-Length or one `Transfer-Encoding: chunked` is answered
 * 400 and its connection closed.
 *
 * What follows such a request is never dispatched, but the 400 cannot always be delivered: uWS parses
 * a connection's bytes in one pass and dispatches each request it finds before control returns, so the
 * refusal is written after the handler returns (an answer written inside it would leave uWS to dispatch
 * the next request in the same read). A request that arrives in the same read as the refused one meets
 * uWS's own rule (a request parsed while the previous answer is pending closes the socket): the
 * connection closes without the 400. Bytes that arrive later find the connection closed. A request with
 * both Content-Length and Transfer-Encoding never reaches a handler: uWS closes the connection itself.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';

/** Why a request's framing is refused, or undefined for one plain Content-Length, one `chunked`, or neither. */
export function framingFault(req: HttpRequest): string | undefined {
  const lengths: string[] = [];
  const codings: string[] = [];
  req.forEach((name, value) => {
    if (name === 'content-length') lengths.push(value);
    else if (name === 'transfer-encoding') codings.push(value);
  });
  if (codings.length > 0) {
    if (codings.length > 1 || codings[0]!.trim().toLowerCase() !== 'chunked') {
      return `Transfer-Encoding ${JSON.stringify(codings.join(', '))} is not accepted: a request body is sent as is (Content-Length) or chunked, nothing else.`;
    }
    return undefined;
  }
  if (lengths.length > 1 && lengths.some((v) => v !== lengths[0])) {
    return `The request has ${lengths.length} different Content-Length headers; its body cannot be told from what follows.`;
  }
  if (lengths.length > 0 && !/^\d{1,15}$/.test(lengths[0]!.trim())) return 'Content-Length is not a number.';
  return undefined;
}

type Handler = (res: HttpResponse, req: HttpRequest) => void;
type Register = (pattern: string, handler: Handler) => TemplatedApp;

/**
 * The app with every route's handler checking the framing first: a faulty request goes to `refuse`
 * instead (which answers 400 and closes the connection, after the handler returned).
 */
export function withFraming(app: TemplatedApp, refuse: (res: HttpResponse, req: HttpRequest, fault: string) => void): TemplatedApp {
  const methods = ['get', 'post', 'put', 'patch', 'del', 'head', 'options', 'any'] as const;
  for (const method of methods) {
    const register = (app[method] as Register).bind(app);
    (app as unknown as Record<string, Register>)[method] = (pattern, handler) =>
      register(pattern, (res, req) => {
        const fault = framingFault(req);
        if (fault === undefined) handler(res, req);
        else refuse(res, req, fault);
      });
  }
  return app;
}
