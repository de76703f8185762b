/**
 * The key and secret files an operator names in the configuration (OPTMARK_SIGNING_KEY_FILE,
 * OPTMARK_FINGERPRINT_SECRET_FILE; the C2PA pair is loaded by main.ts): `serve` loads each one at start,
 * so that a path that does not exist, a directory or a file that does not parse stops the start with a
 * configuration error naming its variable, instead of failing every request that needs it (a verify
 * answered 503 "retry shortly" for as long as the server runs).
 */
import { join } from 'node:path';
import { type Config, ConfigError } from './config.js';
import { fileErrorReason } from './datadir.js';
import { loadFingerprintSecret, SECRET_FILE_NAME } from './fingerprint/secret.js';

/** Loads the files the configuration names; throws a ConfigError for the first one that does not load. */
export async function loadNamedFiles(config: Config): Promise<void> {
  if (config.signingKeyFile !== undefined) {
    const file = config.signingKeyFile;
    const { loadSigningKey } = await import('./provenance/index.js');
    await loadingNamed('OPTMARK_SIGNING_KEY_FILE', file, loadSigningKey({ dataDir: config.dataDir, file }));
  }
  if (config.fingerprintSecretFile !== undefined) {
    const file = config.fingerprintSecretFile;
    await loadingNamed('OPTMARK_FINGERPRINT_SECRET_FILE', file, loadFingerprintSecret({ dataDir: config.dataDir, file }));
  }
}

/**
 * `load`, whose failure, when the operator named the file (`file` set), is a configuration error naming
 * `variable` (namedFileError); a file of the data directory's own fails as it is.
 */
export function loadingNamed<T>(variable: string, file: string | undefined, load: Promise<T>): Promise<T> {
  return load.catch((err: unknown) => {
    throw file === undefined ? err : namedFileError(variable, file, err);
  });
}

/**
 * A failure to load the file `variable` names, as a configuration error: the message without the
 * variable's name when it starts with it (the error then names it once), and with the path when a
 * file system error leaves it out ("EISDIR: illegal operation on a directory, read").
 */
function namedFileError(variable: string, file: string, err: unknown): ConfigError {
  const e = err as NodeJS.ErrnoException | undefined;
  let text = err instanceof Error ? err.message : String(err);
  const reason = fileErrorReason(e?.code);
  if (/^E[A-Z]+$/.test(e?.code ?? '') && !text.includes(file)) text = `cannot read ${file}: ${reason ?? text}`;
  const named = /^(OPTMARK_[A-Z0-9_]+(?:\/OPTMARK_[A-Z0-9_]+)?)(?::\s*|\s+)/.exec(text);
  if (named) return new ConfigError(named[1]!, text.slice(named[0].length));
  return new ConfigError(variable, text);
}

/**
 * For `optmark mark` and `optmark verify`: the fingerprint secret (when the run embeds or detects) and a
 * configured C2PA identity (when it marks with OPTMARK_C2PA=update), loaded once before any file, so that a
 * missing or broken one is one message instead of the same failure for every file. Resolves to that
 * message, or undefined when they load.
 */
async function batchFilesProblem(config: Config, needs: { fingerprint: boolean; c2pa: boolean }): Promise<string | undefined> {
  const { dataDir, fingerprintSecretFile: secretFile, c2paCertFile: certFile, c2paKeyFile: keyFile } = config;
  try {
    if (needs.fingerprint) {
      const own = join(dataDir, SECRET_FILE_NAME);
      // The data directory's own secret: a file system error names the file (EISDIR says no path).
      const load = loadFingerprintSecret({ dataDir, file: secretFile }).catch((err: unknown) => {
        const reason = secretFile === undefined ? fileErrorReason((err as NodeJS.ErrnoException | undefined)?.code) : undefined;
        throw reason === undefined ? err : new Error(`cannot read the fingerprint secret ${own}: ${reason}`);
      });
      await loadingNamed('OPTMARK_FINGERPRINT_SECRET_FILE', secretFile, load);
    }
    if (needs.c2pa && config.c2paMode === 'update' && certFile !== undefined) {
      const { loadC2paIdentity } = await import('./c2pa/identity.js');
      await loadingNamed('OPTMARK_C2PA_CERT_FILE', certFile, loadC2paIdentity({ dataDir, certFile, keyFile }));
    }
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return undefined;
}

/**
 * For `optmark mark` and `optmark verify` on a PostgreSQL store (OPTMARK_DATABASE_URL): the configuration
 * with the fingerprint key the instances share (src/secrets/shared.ts), and this data directory's public
 * keys exchanged with the store's, so that the command embeds and detects, signs and verifies as the
 * servers do. A message when the store cannot be used.
 */
async function shareWithInstances(config: Config): Promise<Config | string> {
  const [{ openStore, StoreError }, { withSharedSecrets }, { syncPublicKeys }] = await Promise.all([
    import('./store/index.js'),
    import('./secrets/shared.js'),
    import('./provenance/shared.js'),
  ]);
  let store;
  try {
    store = await openStore(config);
    const shared = await withSharedSecrets(config, store);
    await syncPublicKeys(store, config.dataDir);
    return shared;
  } catch (err) {
    if (err instanceof StoreError) return err.message;
    throw err;
  } finally {
    await store?.close();
  }
}

/**
 * What `optmark mark` and `optmark verify` do before any file: on a PostgreSQL store, take the instances'
 * shared secrets (shareWithInstances); then load the files the run needs (batchFilesProblem, whose message
 * gets `secretHint` when it is the fingerprint secret's). Resolves to the configuration to run with, or the
 * one line that stops the run.
 */
export async function readyForBatch(config: Config, needs: { fingerprint: boolean; c2pa: boolean; secretHint?: string }): Promise<Config | string> {
  // Several instances on one PostgreSQL store (docs/scaling.md): embed and detect with the fingerprint key
  // they share, and exchange public keys so that every instance verifies this one's tags and it theirs.
  const shared = config.databaseUrl === undefined ? config : await shareWithInstances(config);
  if (typeof shared === 'string') return shared;
  const problem = await batchFilesProblem(shared, needs);
  if (problem === undefined) return shared;
  return needs.secretHint === undefined ? problem : `${problem} (${needs.secretHint})`;
}
