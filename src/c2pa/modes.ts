/** OPTMARK_C2PA: what protect does to a file's Content Credentials (src/c2pa/update.ts, docs/c2pa.md). */
export const C2PA_MODES = ['update', 'refuse', 'invalidate'] as const;
export type C2paMode = (typeof C2PA_MODES)[number];

/**
 * What protect did to the input's Content Credentials: the `Optmark-Content-Credentials` header's value.
 * `updated`: an update manifest was added and the result validates, as the input did; `parent-invalid`:
 * one was added to credentials that did not validate when they came; `unverified`: one was added, and
 * validity hangs on checks that need a network (a CAWG identity issuer's DID); `invalidated`: the edit
 * broke them or they could not be updated (docs/c2pa.md).
 */
export type CredentialsOutcome = 'none' | 'unchanged' | 'updated' | 'parent-invalid' | 'unverified' | 'invalidated';
export const CREDENTIALS_HEADER = 'Optmark-Content-Credentials';
