/**
 * The Authorization header side of authentication: bearer token extraction (RFC 6750 §2.1, scheme
 * case-insensitive per RFC 9110 §11.1) and the matching WWW-Authenticate challenge (RFC 6750 §3).
 */

export type AuthFailureCode = 'missing_api_key' | 'invalid_api_key' | 'plan_required';

export type ParsedAuthorization = { kind: 'missing' } | { kind: 'other_scheme' } | { kind: 'bearer'; token: string };

/** Longest header value looked at; a key is 51 characters, so anything far longer is not one. */
const MAX_AUTHORIZATION_LENGTH = 512;
const BEARER = /^bearer(?:[ \t]+(\S*))?[ \t]*$/i;

/** Splits an Authorization header value into "no credentials", "not Bearer" or the bearer token. */
export function parseAuthorization(value: string | undefined): ParsedAuthorization {
  if (value === undefined) return { kind: 'missing' };
  const trimmed = value.trim();
  if (trimmed === '') return { kind: 'missing' };
  if (trimmed.length > MAX_AUTHORIZATION_LENGTH) return { kind: 'other_scheme' };
  const m = BEARER.exec(trimmed);
  if (!m) return { kind: 'other_scheme' };
  const token = m[1];
  return token === undefined || token === '' ? { kind: 'missing' } : { kind: 'bearer', token };
}

/**
 * The WWW-Authenticate value for a failed authentication. Without credentials RFC 6750 §3.1 wants no
 * error attribute; a bad key is `invalid_token`; a plan without API access is 403 `insufficient_scope`.
 */
export function wwwAuthenticate(code: AuthFailureCode, realm = 'optmark'): string {
  switch (code) {
    case 'missing_api_key':
      return `Bearer realm="${realm}"`;
    case 'invalid_api_key':
      return `Bearer realm="${realm}", error="invalid_token"`;
    case 'plan_required':
      return `Bearer realm="${realm}", error="insufficient_scope"`;
  }
}
