/**
 * What an API request's handler reads from its headers: uWS's HttpRequest lives only during the handler
 * call, so everything the request needs later is copied out at once.
 */
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Operation } from '../store/index.js';
import { requestId } from './filename.js';

/** What the handler reads from the request's headers (uWS's HttpRequest lives only during the handler call). */
export interface Head {
  id: string;
  /** The client's address, as uWS gives it (the proxy's, behind one). */
  address: string;
  authorization: string;
  contentType: string;
  contentLength: string;
  /** verify's `?fingerprint=` ('' when absent; `skip` leaves the pixel detector out). */
  fingerprint: string;
  /** verify's `?vault=` ('' when absent; `match` also searches the account's vault for the picture). */
  vault: string;
  /** protect: answer the marked bytes themselves (the Accept header prefers an image type to JSON). */
  raw: boolean;
  /** The Idempotency-Key header, unparsed ('' when absent). */
  idempotencyKey: string;
}

const JSON_RANGES = new Set(['application/json', 'application/*', '*/*']);
const IMAGE_RANGES = new Set(['image/*', 'image/jpeg', 'image/png', 'image/webp']);

/**
 * True when an Accept header prefers the image itself to JSON: an image range (`image/*` or the
 * JPEG/PNG/WebP types) with a higher q than any JSON range (`application/json`, `application/*`,
 * `*\/*`). No header, or a tie, keeps JSON, the contract's default.
 */
export function prefersImage(accept: string): boolean {
  let image = 0;
  let json = 0;
  for (const part of accept.slice(0, 1024).split(',')) {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!range) continue;
    let q = 1;
    for (const p of params) if (p.startsWith('q=')) q = Number.parseFloat(p.slice(2)) || 0;
    if (IMAGE_RANGES.has(range)) image = Math.max(image, q);
    else if (JSON_RANGES.has(range)) json = Math.max(json, q);
  }
  return image > 0 && image > json;
}

/**
 * One query parameter ('' when absent). uWS's fallback transport (node:http) cannot answer getQuery
 * (it parses a relative URL as absolute and throws), but its getUrl keeps the query string.
 */
function queryParam(req: HttpRequest, key: string): string {
  try {
    return req.getQuery(key) ?? '';
  } catch {
    const url = req.getUrl();
    const q = url.indexOf('?');
    return q < 0 ? '' : (new URLSearchParams(url.slice(q + 1)).get(key) ?? '');
  }
}

/** The client's address as text; the uWS JS fallback has no address (it throws "Not implemented"), so all its clients share one. */
export function remoteAddress(res: HttpResponse): string {
  try {
    return Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
  } catch {
    return 'unknown';
  }
}

/** The headers of an API request, read during its handler call. */
export function readHead(operation: Operation, res: HttpResponse, req: HttpRequest): Head {
  return {
    id: requestId(req.getHeader('x-request-id'), randomUUID),
    address: remoteAddress(res),
    authorization: req.getHeader('authorization'),
    contentType: req.getHeader('content-type'),
    contentLength: req.getHeader('content-length'),
    fingerprint: operation === 'verify' ? queryParam(req, 'fingerprint') : '',
    vault: operation === 'verify' ? queryParam(req, 'vault') : '',
    raw: operation === 'protect' && prefersImage(req.getHeader('accept')),
    idempotencyKey: req.getHeader('idempotency-key'),
  };
}
