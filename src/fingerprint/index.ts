/** Experimental in-pixel fingerprint: a keyed spread-spectrum mark on luma (see docs/fingerprint.md). */
export { loadFingerprintSecret } from './secret.js';
export { detectFingerprint, type FingerprintDetail, type FingerprintResult } from './detect.js';
export { embedFingerprint } from './embed.js';
export { fingerprintEngine, nativeSimd, type Engine } from './native.js';
