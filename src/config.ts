/**
 * Configuration from environment variables, read and validated in this one module (nothing else reads
 * process.env). Defaults derive from the machine; every validation message names the variable.
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { MAX_PROTECT_GROWTH_BYTES } from './formats/limits.js';

export interface Config {
  host: string;
  port: number;
  /**
   * Listen with SO_REUSEPORT, so that several processes share the port on purpose. Off: a port another
   * process listens on stops the start with a message naming it.
   */
  reusePort: boolean;
  dataDir: string;
  /** Largest accepted upload, in bytes (the image part, and the request body it travels in). */
  maxUploadBytes: number;
  /** Pixel budget for any decode (verify's detector, layer embedding). */
  maxPixels: number;
  poolSize: number;
  /** Tasks waiting for a worker beyond which requests are answered 503. */
  queueLength: number;
  /**
   * Size of the shared arena holding every in-flight upload and protect response body; when a request
   * finds no room in it, 503. It is the server's bound on request memory.
   */
  maxInflightBytes: number;
  /**
   * The first bytes of that arena, which stay resident when idle pages go back to the OS: a burst after a
   * pause lands in pages it already has instead of faulting fresh ones in (0 hands everything back).
   */
  warmInflightBytes: number;
  taskTimeoutMs: number;
  shutdownTimeoutMs: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  allowUwsFallback: boolean;
  bootstrap: boolean;
  defaultProtectLimit: number;
  defaultVerifyLimit: number;
  /** Optional path of a PEM Ed25519 private key to sign provenance tags with (else one in dataDir). */
  signingKeyFile: string | undefined;
  /** Optional path of the fingerprint secret (else one in dataDir). */
  fingerprintSecretFile: string | undefined;
  /** Run the fingerprint detector in verify. */
  fingerprintDetect: boolean;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `expected a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(name, `must be between ${min} and ${max}, got ${raw}`);
  }
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, `expected on/off (1/0, true/false), got ${JSON.stringify(raw)}`);
}

function str(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Multipart framing (boundaries, part headers) a request body may carry on top of the image limit. */
export const MULTIPART_SLACK_BYTES = 64 * 1024;

/**
 * Arena room one largest protect takes when admitted: the request body (the image limit plus multipart
 * framing) and its response body (base64 of that plus the metadata growth protect allows, plus 4 KiB of JSON),
 * each rounded up to the arena's 4 KiB pages. src/pipeline/body.ts sizes bodies the same way (a test
 * keeps the two in step).
 */
export function arenaBytesForOneProtect(maxUploadBytes: number): number {
  const page = (n: number): number => Math.ceil(n / 4096) * 4096;
  const body = maxUploadBytes + MULTIPART_SLACK_BYTES;
  return page(body) + page(Math.ceil((body + MAX_PROTECT_GROWTH_BYTES) / 3) * 4 + 4096);
}

/** Reads and validates the configuration; throws ConfigError naming the offending variable. */
export function loadConfig(env: Env = process.env): Config {
  const cores = Math.max(1, availableParallelism());
  const poolSize = int(env, 'OPTMARK_POOL_SIZE', cores, 1, 256);
  const maxUploadBytes = int(env, 'OPTMARK_MAX_UPLOAD_BYTES', 26_214_400, 1024, 1024 ** 3);
  const level = (str(env, 'OPTMARK_LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError('OPTMARK_LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  }
  const maxInflightBytes = int(env, 'OPTMARK_MAX_INFLIGHT_BYTES', Math.max(384 * 1024 ** 2, 4 * maxUploadBytes), 1024, 64 * 1024 ** 3);
  const oneProtect = arenaBytesForOneProtect(maxUploadBytes);
  if (maxInflightBytes < oneProtect) {
    throw new ConfigError('OPTMARK_MAX_INFLIGHT_BYTES', `must be at least ${oneProtect}: one largest upload plus its base64 answer`);
  }
  const warmInflightBytes = int(env, 'OPTMARK_WARM_INFLIGHT_BYTES', Math.min(32 * 1024 ** 2, maxInflightBytes), 0, maxInflightBytes);
  const host = str(env, 'OPTMARK_HOST') ?? '0.0.0.0';
  if (!/^[0-9A-Za-z.:-]+$/.test(host)) throw new ConfigError('OPTMARK_HOST', `not a host name or address: ${JSON.stringify(host)}`);
  const signingKeyFile = str(env, 'OPTMARK_SIGNING_KEY_FILE');
  const fingerprintSecretFile = str(env, 'OPTMARK_FINGERPRINT_SECRET_FILE');
  return {
    host,
    port: int(env, 'OPTMARK_PORT', 8080, 0, 65535),
    reusePort: bool(env, 'OPTMARK_REUSE_PORT', false),
    dataDir: resolve(str(env, 'OPTMARK_DATA_DIR') ?? './data'),
    maxUploadBytes,
    maxPixels: int(env, 'OPTMARK_MAX_PIXELS', 100_000_000, 1, 2 ** 40),
    poolSize,
    queueLength: int(env, 'OPTMARK_QUEUE_LENGTH', poolSize * 8, 0, 1_000_000),
    maxInflightBytes,
    warmInflightBytes,
    taskTimeoutMs: int(env, 'OPTMARK_TASK_TIMEOUT_MS', 30_000, 100, 3_600_000),
    shutdownTimeoutMs: int(env, 'OPTMARK_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 3_600_000),
    logLevel: level as Config['logLevel'],
    allowUwsFallback: bool(env, 'OPTMARK_ALLOW_UWS_FALLBACK', false),
    bootstrap: bool(env, 'OPTMARK_BOOTSTRAP', true),
    defaultProtectLimit: int(env, 'OPTMARK_DEFAULT_PROTECT_LIMIT', 10_000, 0, 2 ** 31),
    defaultVerifyLimit: int(env, 'OPTMARK_DEFAULT_VERIFY_LIMIT', 50_000, 0, 2 ** 31),
    signingKeyFile: signingKeyFile === undefined ? undefined : resolve(signingKeyFile),
    fingerprintSecretFile: fingerprintSecretFile === undefined ? undefined : resolve(fingerprintSecretFile),
    fingerprintDetect: bool(env, 'OPTMARK_FINGERPRINT_DETECT', true),
  };
}

/** The variables, their defaults and meaning: the README's configuration table is generated from this. */
export const CONFIG_DOC: ReadonlyArray<readonly [name: string, fallback: string, meaning: string]> = [
  ['OPTMARK_HOST', '0.0.0.0', 'Address to listen on.'],
  ['OPTMARK_PORT', '8080', 'Port to listen on (0 picks a free one).'],
  ['OPTMARK_REUSE_PORT', 'off', 'Share the port with other processes on purpose (SO_REUSEPORT); off, a port in use stops the start.'],
  ['OPTMARK_DATA_DIR', './data', 'SQLite store, signing keys and fingerprint secret.'],
  ['OPTMARK_MAX_UPLOAD_BYTES', '26214400', 'Largest accepted upload (25 MiB).'],
  ['OPTMARK_MAX_PIXELS', '100000000', 'Pixel budget of any decode (verify detector, layers).'],
  ['OPTMARK_POOL_SIZE', 'CPU cores', 'Worker threads doing all per-byte work.'],
  ['OPTMARK_QUEUE_LENGTH', '8 x pool size', 'Tasks that may wait for a worker; beyond it 503 + Retry-After.'],
  ['OPTMARK_MAX_INFLIGHT_BYTES', '384 MiB', 'Shared arena for in-flight uploads and response bodies; full means 503 + Retry-After.'],
  ['OPTMARK_WARM_INFLIGHT_BYTES', '32 MiB', 'Start of that arena kept resident when idle pages go back to the OS (0 = none).'],
  ['OPTMARK_TASK_TIMEOUT_MS', '30000', 'A task running longer is aborted and its worker replaced.'],
  ['OPTMARK_SHUTDOWN_TIMEOUT_MS', '10000', 'How long SIGTERM/SIGINT waits for in-flight requests.'],
  ['OPTMARK_LOG_LEVEL', 'info', 'fatal, error, warn, info, debug, trace or silent.'],
  ['OPTMARK_ALLOW_UWS_FALLBACK', 'off', 'Allow uWebSockets.js\'s slow pure-JS fallback.'],
  ['OPTMARK_BOOTSTRAP', 'on', 'On an empty store, create a "default" pro account and print one key.'],
  ['OPTMARK_DEFAULT_PROTECT_LIMIT', '10000', 'Monthly protects per account unless overridden.'],
  ['OPTMARK_DEFAULT_VERIFY_LIMIT', '50000', 'Monthly verifies per account unless overridden.'],
  ['OPTMARK_SIGNING_KEY_FILE', '(data dir)', 'PEM Ed25519 private key for provenance tags.'],
  ['OPTMARK_FINGERPRINT_SECRET_FILE', '(data dir)', 'Secret the fingerprint pattern is derived from.'],
  ['OPTMARK_FINGERPRINT_DETECT', 'on', 'Run the fingerprint detector in verify.'],
];
