/**
 * The layers as a worker runs them: provenance verification against this data directory's public
 * keys, fingerprint detection with the server secret, and the signing key for the layer path. Each is
 * loaded once per worker, on first use (or at warm-up), never per request.
 */
import { OptmarkError } from '../errors.js';
import { detectFingerprint, loadFingerprintSecret } from '../fingerprint/index.js';
import type { ParsedImage } from '../formats/index.js';
import { Keyring, SigningKeySource, verifyProvenance, type SigningKey } from '../provenance/index.js';
import { NOT_FOUND_FINGERPRINT, type FingerprintStatus, type Layers, type ProvenanceStatus } from './layers.js';
import type { MarkContext } from './mark.js';

/** Where the layers' keys and secrets come from, and their limits. */
export interface LayerSettings {
  dataDir: string;
  maxPixels: number;
  signingKeyFile: string | undefined;
  fingerprintSecretFile: string | undefined;
  /** Run the fingerprint detector in verify. */
  fingerprintDetect: boolean;
  /** The detector's time limit (OPTMARK_FINGERPRINT_TIMEOUT_MS; default src/fingerprint's). */
  fingerprintTimeoutMs?: number | undefined;
}

export class LiveLayers implements Layers, MarkContext {
  readonly maxPixels: number;
  readonly #init: LayerSettings;
  readonly #signing: SigningKeySource;
  #keyring: Promise<Keyring> | undefined;
  #secret: Promise<Uint8Array> | undefined;

  constructor(init: LayerSettings) {
    this.#init = init;
    this.maxPixels = init.maxPixels;
    this.#signing = new SigningKeySource({ dataDir: init.dataDir, file: init.signingKeyFile });
  }

  /** Loads what verify needs, so the first request does not pay for it. Never throws. */
  async warm(): Promise<void> {
    await Promise.allSettled([this.#keys(), this.#init.fingerprintDetect ? this.fingerprintSecret() : undefined]);
  }

  async verifyProvenance(input: Uint8Array | ParsedImage): Promise<ProvenanceStatus> {
    const r = await verifyProvenance(input, await this.#keys());
    return { present: r.present, valid: r.valid, verifiable: r.verifiable };
  }

  async detectFingerprint(input: Uint8Array | ParsedImage): Promise<FingerprintStatus> {
    if (!this.#init.fingerprintDetect) return { ...NOT_FOUND_FINGERPRINT };
    let secret: Uint8Array;
    try {
      secret = await this.fingerprintSecret();
    } catch (err) {
      // No secret, no detector: an answer of "not found" would claim a look that was never taken (the
      // secret is loaded again on the next call).
      throw new OptmarkError('fingerprint_unavailable', undefined, { cause: err });
    }
    const r = await detectFingerprint(input, secret, { maxPixels: this.maxPixels, timeoutMs: this.#init.fingerprintTimeoutMs });
    return { present: r.present, confidence: r.confidence, blocks: r.blocks, ...(r.warning ? { warning: r.warning } : {}) };
  }

  signingKey(): Promise<SigningKey> {
    return this.#signing.get();
  }

  fingerprintSecret(): Promise<Uint8Array> {
    return (this.#secret ??= loadFingerprintSecret({ dataDir: this.#init.dataDir, file: this.#init.fingerprintSecretFile }).catch((err: unknown) => {
      this.#secret = undefined;
      throw err;
    }));
  }

  /** Keyring.open never rejects: an unreadable store is an empty keyring (tags then unverifiable). */
  #keys(): Promise<Keyring> {
    return (this.#keyring ??= Keyring.open({ dataDir: this.#init.dataDir, file: this.#init.signingKeyFile }));
  }
}
