/** The Private Vault's settings (docs/vault.md), spread into the settings table of src/config.ts. */
import { path, type Setting, setting, wholeNumber } from '../settings-kit.js';
import { DEFAULT_VAULT_LIMIT_BYTES } from './rows.js';

export interface VaultConfig {
  /** An account's vault limit in bytes unless it has its own (`account set-limits --vault`). */
  vaultLimitBytes: number;
  /** Optional file of the vault master key (else one in the data dir, or the store's shared one). */
  vaultMasterKeyFile: string | undefined;
  /** How often the reconciler runs (it also runs at start-up). */
  vaultReconcileIntervalMs: number;
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
    doc: "A file of 32 random bytes (mode 0600) that wraps every account's vault data key (docs/vault.md, rotation).",
  }),
  setting({
    variable: 'OPTMARK_VAULT_RECONCILE_INTERVAL_MS',
    key: 'vaultReconcileIntervalMs',
    shown: '3600000',
    fallback: () => 3_600_000,
    parse: wholeNumber(1000, 7 * 24 * 3_600_000),
    doc: 'How often the vault reconciler removes stored objects no row names and rows whose bytes are gone (also at start-up).',
  }),
];
