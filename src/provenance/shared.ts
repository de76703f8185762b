/**
 * Provenance keys across instances (PostgreSQL store). Each instance signs with the private key the
 * operator gives it (its data directory's signing/current.pem, or OPTMARK_SIGNING_KEY_FILE); the shared
 * store holds every public key with its id. The data directory's public/ stays what verification reads
 * (the workers' Keyring), and this module keeps the two the same: local keys are published to the store,
 * the store's keys are written to public/. A key recorded by any instance (a `signing-key rotate`, the
 * first `mark --provenance`) reaches every running server at once through PostgreSQL's LISTEN/NOTIFY,
 * and within SYNC_INTERVAL_MS at worst.
 */
import type { Store } from '../store/index.js';
import { addPublicKey, localPublicKeys } from './keys.js';

export const SYNC_INTERVAL_MS = 5000;

/** One exchange both ways; returns how many keys went each way. */
export async function syncPublicKeys(store: Store, dataDir: string): Promise<{ published: number; received: number }> {
  if (!store.sharesSecrets) return { published: 0, received: 0 };
  const [local, remote] = await Promise.all([localPublicKeys(dataDir), store.listPublicKeys()]);
  const remoteIds = new Set(remote.map((k) => k.keyId));
  let published = 0;
  let received = 0;
  for (const [keyId, pem] of local) if (!remoteIds.has(keyId) && (await store.recordPublicKey(keyId, pem))) published++;
  for (const k of remote) if (!local.has(k.keyId) && (await addPublicKey(dataDir, k.pem, k.keyId)) !== undefined) received++;
  return { published, received };
}

/** The server's side: a sync at start, on every notification from another instance, and every few seconds. */
export class PublicKeySync {
  #timer: NodeJS.Timeout | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #running: Promise<unknown> | undefined;
  #again = false;

  constructor(
    readonly store: Store,
    readonly dataDir: string,
    readonly onError: (err: Error) => void,
  ) {}

  async start(): Promise<void> {
    if (!this.store.sharesSecrets) return;
    await this.sync();
    this.#unlisten = await this.store.onPublicKeysChanged(() => void this.sync());
    this.#timer = setInterval(() => void this.sync(), SYNC_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Runs a sync, or one more after the one in progress (notifications never pile up). */
  sync(): Promise<unknown> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = syncPublicKeys(this.store, this.dataDir)
      .catch((err: unknown) => this.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          void this.sync();
        }
      });
    return this.#running;
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#unlisten?.();
    await this.#running;
  }
}
