// Assertions shared by the HTTP suites: the shape every failure has, and conformance to docs/openapi.json.
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { openApiProblems, schemaProblems } from './openapi.js';
import type { Answer } from './server.js';

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const RATE_LIMIT = /^"(protect|verify)";r=\d+;t=\d+$/;
export const RATE_LIMIT_POLICY = /^"(protect|verify)";q=\d+;w=\d+$/;

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A failure: the status, the stable code, a JSON {error, code} body and a request id. */
export function expectError(a: Answer, status: number, code: string): void {
  expect({ status: a.status, body: a.json }, a.body.toString('utf8').slice(0, 300)).toEqual({ status, body: { error: expect.any(String), code } });
  expect(a.json.error.length).toBeGreaterThan(0);
  expect(a.headers['content-type']).toBe('application/json');
  expect(a.headers['x-request-id']).toBeTruthy();
  expect(schemaProblems('Error', a.json)).toEqual([]);
}

/** The answer conforms to the document's description of `method path` (body schema and declared headers). */
export function expectConforms(a: Answer, method: string, path: string): void {
  expect(openApiProblems(method, path, a), `${method} ${path} → ${a.status}`).toEqual([]);
}

/** The remaining units in a RateLimit field. */
export function remaining(a: Answer): number {
  const m = /;r=(\d+);/.exec(a.headers.ratelimit ?? '');
  if (!m) throw new Error(`no RateLimit header: ${JSON.stringify(a.headers)}`);
  return Number(m[1]);
}
