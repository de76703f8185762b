/** OPTMARK_C2PA: what protect does to a file's Content Credentials (src/c2pa/update.ts, docs/c2pa.md). */
export const C2PA_MODES = ['update', 'refuse', 'invalidate'] as const;
export type C2paMode = (typeof C2PA_MODES)[number];

/** What protect did to the input's Content Credentials: the `Optmark-Content-Credentials` header's value. */
export type CredentialsOutcome = 'none' | 'unchanged' | 'updated' | 'invalidated';
export const CREDENTIALS_HEADER = 'Optmark-Content-Credentials';
