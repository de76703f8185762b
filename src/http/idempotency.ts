/**
 * The Idempotency-Key request header (draft-ietf-httpapi-idempotency-key-header-07, and what Stripe's API
 * does): a key the client draws for one logical request (a UUID, say) and sends again, unchanged, with
 * every retry of it. Scoped to the account. The draft's form is a Structured Fields string
 * (`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`); the bare form Stripe's clients send is
 * taken too. https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/
 */
import { OptmarkError } from '../errors.js';

/** The longest key accepted (Stripe's bound). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** Seconds a client waits before retrying a key whose first attempt is still in progress (409). */
export const IDEMPOTENCY_RETRY_AFTER_SECONDS = 1;

// Printable ASCII without '"' and '\' (an sf-string's quote and escape), not starting or ending with a space.
const KEY = /^[!#-[\]-~](?:[ !#-[\]-~]*[!#-[\]-~])?$/;

/**
 * The key of an Idempotency-Key header value, undefined when there is none ('' is none: uWS cannot tell an
 * empty header from a missing one). Throws invalid_idempotency_key when it is malformed.
 */
export function parseIdempotencyKey(header: string): string | undefined {
  if (header === '') return undefined;
  const quoted = header.length >= 2 && header.startsWith('"') && header.endsWith('"');
  const key = quoted ? header.slice(1, -1) : header;
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH || !KEY.test(key)) {
    throw new OptmarkError(
      'invalid_idempotency_key',
      `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters without '"' or '\\' (optionally in double quotes); a UUID is a good key.`,
    );
  }
  return key;
}
