/**
 * The vault as `optmark serve` runs it: the master key, the storage (S3 when OPTMARK_VAULT_URL is set,
 * else the folder under the data directory),
 * originals hashed in the image pool (recognition), and the reconciler once as it starts (beside the
 * start, not before it) and then every
 * OPTMARK_VAULT_RECONCILE_INTERVAL_MS (on every instance: each pass is safe beside another).
 */
import { join } from 'node:path';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { ImagePool } from '../pool/pool.js';
import type { Store } from '../store/index.js';
import { FolderStorage } from './folder.js';
import { vaultMasterKey } from './keys.js';
import { poolHashOf } from './recognition.js';
import { S3Storage } from './s3.js';
import { type ReconcileReport, Vault } from './service.js';
import type { VaultStorage } from './storage.js';

export interface RunningVault {
  vault: Vault;
  /** Totals of what the reconciler removed since start (for the metrics). */
  readonly reconciled: ReconcileReport;
  stop(): void;
}

/** Where the configuration keeps the sealed objects: OPTMARK_VAULT_URL's bucket, else the data directory's folder. */
export function vaultStorage(config: Config): VaultStorage {
  return config.vaultUrl
    ? new S3Storage({ ...config.vaultUrl, endpoint: config.vaultS3Endpoint, region: config.vaultS3Region })
    : new FolderStorage(join(config.dataDir, 'vault'));
}

export async function openVault(config: Config, store: Store, pool: ImagePool, log: Logger): Promise<RunningVault> {
  const storage = vaultStorage(config);
  log.info(
    config.vaultUrl
      ? {
          storage: storage.kind,
          bucket: config.vaultUrl.bucket,
          prefix: config.vaultUrl.prefix,
          endpoint: config.vaultS3Endpoint ?? 'AWS S3',
          region: config.vaultS3Region,
        }
      : { storage: storage.kind, folder: join(config.dataDir, 'vault') },
    'vault storage',
  );
  const vault = new Vault({
    rows: store.vault,
    storage,
    masterKey: await vaultMasterKey(config.dataDir, store, config.vaultMasterKeyFile),
    defaultLimitBytes: config.vaultLimitBytes,
    hashOf: poolHashOf(pool),
  });
  const reconciled: ReconcileReport = { expiredReservations: 0, orphanObjects: 0, missingObjects: 0 };
  const pass = async (): Promise<void> => {
    try {
      const r = await vault.reconcile();
      for (const k of Object.keys(r) as (keyof ReconcileReport)[]) reconciled[k] += r[k];
      if (r.orphanObjects || r.missingObjects || r.expiredReservations)
        log.warn({ ...r, storage: vault.storageKind }, 'vault reconciled: removed what no row or no stored object backs');
    } catch (err) {
      log.error({ err }, 'vault reconciliation failed');
    }
  };
  // The first pass runs beside the start, not before it: listing a large bucket must not hold up serving.
  void pass();
  const timer = setInterval(() => void pass(), config.vaultReconcileIntervalMs);
  timer.unref();
  return { vault, reconciled, stop: () => clearInterval(timer) };
}
