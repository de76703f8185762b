// Checks real answers against docs/openapi.json: the body against the operation's JSON Schema (2020-12,
// the dialect of OpenAPI 3.1) and every header the document declares for that answer.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import type { Answer } from './server.js';
import { ROOT } from './server.js';

type Json = Record<string, any>; // an OpenAPI document: read as loose JSON
const DOC_ID = 'https://optmark.test/openapi.json';

export const OPENAPI: Json = JSON.parse(readFileSync(join(ROOT, 'docs', 'openapi.json'), 'utf8')) as Json;

// The whole document is registered under one id, so "#/components/..." references resolve inside it.
// strict: false because the document's non-schema parts (paths, info) are not JSON Schema keywords.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(OPENAPI, DOC_ID);

/** Follows one local "$ref" of the document (responses, headers). */
function deref(node: Json): Json {
  if (typeof node.$ref !== 'string') return node;
  let at: Json = OPENAPI;
  for (const seg of (node.$ref as string).replace(/^#\//, '').split('/')) at = at[seg] as Json;
  return deref(at);
}

/** The JSON pointer of a schema inside the document, for ajv. */
function pointer(path: string[]): string {
  return `${DOC_ID}#/${path.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

/** The problems of `answer` against the document's description of `method path` → its status; [] when it conforms. */
export function openApiProblems(method: string, path: string, answer: Answer): string[] {
  const operation = OPENAPI.paths?.[path]?.[method.toLowerCase()] as Json | undefined;
  if (!operation) return [`${method} ${path} is not in the document`];
  const responses = operation.responses as Json;
  const key = String(answer.status);
  if (!responses[key]) return [`${method} ${path} documents no ${key} answer`];
  const response = deref(responses[key] as Json);
  const problems: string[] = [];

  for (const [name, raw] of Object.entries((response.headers ?? {}) as Json)) {
    const header = deref(raw as Json);
    const value = answer.headers[name.toLowerCase()];
    if (value === undefined) {
      if (header.required === false) continue; // declared optional (raw protect answers' headers)
      problems.push(`header ${name} is missing`);
      continue;
    }
    if (header.schema?.type === 'integer' && !/^\d+$/.test(value)) problems.push(`header ${name} is not an integer: ${value}`);
  }

  const media = Object.keys((response.content ?? {}) as Json)[0];
  if (media === undefined) return problems;
  const type = (answer.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (type !== media) problems.push(`Content-Type is ${type}, the document says ${media}`);
  if (media !== 'application/json') return problems;
  if (answer.json === undefined) return [...problems, 'the body is not JSON'];

  // Validate through the registered document, so references inside the schema resolve; a schema that is
  // itself a "$ref" is validated at its target.
  const schema = response.content[media].schema as Json;
  const validate =
    typeof schema.$ref === 'string'
      ? ajv.getSchema(`${DOC_ID}${schema.$ref as string}`)
      : ajv.getSchema(pointer(responseSchemaPath(path, method, key, responses[key] as Json, media)));
  if (!validate) return [...problems, `no schema for ${method} ${path} ${key}`];
  if (!validate(answer.json)) problems.push(...(validate.errors ?? []).map((e: ErrorObject) => `body${e.instancePath} ${e.message ?? ''}`));
  return problems;
}

/** The document path of an inline response schema (the response itself may be a "$ref" to components). */
function responseSchemaPath(path: string, method: string, status: string, response: Json, media: string): string[] {
  if (typeof response.$ref === 'string') return [...(response.$ref as string).replace(/^#\//, '').split('/'), 'content', media, 'schema'];
  return ['paths', path, method.toLowerCase(), 'responses', status, 'content', media, 'schema'];
}

/** Validates a value against one of the document's component schemas. */
export function schemaProblems(component: string, value: unknown): string[] {
  const validate = ajv.getSchema(`${DOC_ID}#/components/schemas/${component}`);
  if (!validate) return [`no component schema ${component}`];
  return validate(value) ? [] : (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath} ${e.message ?? ''}`);
}
