/** The Private Vault's settings (docs/vault.md), spread into the settings table of src/config.ts. */
import { Invalid, path, type Setting, setting, wholeNumber } from '../settings-kit.js';
import { DEFAULT_VAULT_LIMIT_BYTES } from './rows.js';
import { parseS3Url, type S3Location } from './s3.js';

export interface VaultConfig {
  /** An account's vault limit in bytes unless it has its own (`account set-limits --vault`). */
  vaultLimitBytes: number;
  /** Optional file of the vault master key (else one in the data dir, or the store's shared one). */
  vaultMasterKeyFile: string | undefined;
  /** How often the reconciler runs (it also runs at start-up). */
  vaultReconcileIntervalMs: number;
  /** OPTMARK_VAULT_URL: the S3 bucket and prefix of the sealed objects (none: the folder in the data dir). */
  vaultUrl: S3Location | undefined;
  /** An S3-compatible service's address (none: AWS S3 of the region). */
  vaultS3Endpoint: string | undefined;
  vaultS3Region: string;
}

export const VAULT_SETTINGS: readonly Setting[] = [
  setting({
    variable: 'OPTMARK_VAULT_LIMIT_BYTES',
    key: 'vaultLimitBytes',
    shown: '10000000000 (10 GB)',
    fallback: () => DEFAULT_VAULT_LIMIT_BYTES,
    parse: wholeNumber(0, Number.MAX_SAFE_INTEGER),
    doc: "An account's Private Vault limit in bytes, unless `optmark account set-limits --vault` gave it its own (docs/vault.md).",
  }),
  setting({
    variable: 'OPTMARK_VAULT_MASTER_KEY_FILE',
    key: 'vaultMasterKeyFile',
    shown: '(none: vault-master.key in the data dir, shared through PostgreSQL)',
    fallback: () => undefined,
    parse: path,
    doc: "A file of 32 random bytes (mode 0600) that wraps every account's vault data key; `optmark vault rotate-key` replaces it (docs/vault.md).",
  }),
  setting({
    variable: 'OPTMARK_VAULT_RECONCILE_INTERVAL_MS',
    key: 'vaultReconcileIntervalMs',
    shown: '3600000',
    fallback: () => 3_600_000,
    parse: wholeNumber(1000, 7 * 24 * 3_600_000),
    doc: 'How often the vault reconciler removes stored objects no row names and rows whose bytes are gone (also at start-up).',
  }),
  setting({
    variable: 'OPTMARK_VAULT_URL',
    key: 'vaultUrl',
    shown: '(none: <data dir>/vault)',
    fallback: () => undefined,
    parse: (raw) => {
      try {
        return parseS3Url(raw);
      } catch (err) {
        throw new Invalid((err as Error).message);
      }
    },
    doc: 'Where the vault keeps its sealed objects: s3://bucket/prefix for S3-compatible storage that every instance shares (credentials from the AWS SDK default chain: AWS_ACCESS_KEY_ID, AWS_PROFILE, roles); unset, a folder in the data dir (docs/vault.md, Storage).',
  }),
  setting({
    variable: 'OPTMARK_VAULT_S3_ENDPOINT',
    key: 'vaultS3Endpoint',
    shown: '(none: AWS S3)',
    fallback: () => undefined,
    parse: (raw) => {
      let u: URL;
      try {
        u = new URL(raw);
      } catch {
        throw new Invalid(`expected an http:// or https:// address, got ${JSON.stringify(raw)}`);
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Invalid(`expected an http:// or https:// address, got ${JSON.stringify(raw)}`);
      return raw;
    },
    doc: 'The address of an S3-compatible service (MinIO, Ceph, R2...) for OPTMARK_VAULT_URL; requests then name the bucket in the path.',
  }),
  setting({
    variable: 'OPTMARK_VAULT_S3_REGION',
    key: 'vaultS3Region',
    shown: 'us-east-1',
    fallback: () => 'us-east-1',
    parse: (raw) => {
      if (!/^[a-z0-9-]{1,40}$/.test(raw)) throw new Invalid(`expected a region name such as eu-west-1, got ${JSON.stringify(raw)}`);
      return raw;
    },
    doc: "The bucket's region for OPTMARK_VAULT_URL (the SDK signs requests for it).",
  }),
];
