/**
 * The configuration: one table (SETTINGS) declares each setting once: its environment variable, its
 * default, its parser and a one-line doc. Loading (loadConfig), the text of `optmark serve --help`
 * (settingsHelp) and docs/configuration.md (configurationDoc, written by `npm run docs:config`) all derive
 * from it, and a test fails when the document and the table disagree. Nothing else reads process.env
 * for settings; every validation message names the variable.
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { C2PA_MODES, type C2paMode } from './c2pa/modes.js';
import { MAX_PROTECT_GROWTH_BYTES } from './formats/limits.js';
import { Invalid, onOff, type Parser, path, type Setting, setting, wholeNumber, type Earlier } from './settings-kit.js';
import { checkPolicyUrl } from './signals/site.js';
import { VAULT_SETTINGS, type VaultConfig } from './vault/settings.js';
import { NOT_ALLOWED, parseTrainingMining, type TrainingMining } from './signals/training.js';
import { SCAN_SETTINGS } from './scans/settings.js';

export interface Config extends VaultConfig {
  host: string;
  port: number;
  /** Listen with SO_REUSEPORT, so that several processes share the port on purpose. */
  reusePort: boolean;
  dataDir: string;
  /** Largest accepted upload, in bytes (the image part, and the request body it travels in). */
  maxUploadBytes: number;
  /** Pixel budget for any decode (verify's detector, layer embedding). */
  maxPixels: number;
  poolSize: number;
  /** Tasks waiting for a worker beyond which requests are answered 503. */
  queueLength: number;
  /** The in-flight budget: every upload and protect answer in flight together (src/transfer/). */
  maxInflightBytes: number;
  /** The first bytes of that budget, which stay resident when idle pages go back to the OS. */
  warmInflightBytes: number;
  taskTimeoutMs: number;
  /** A worker whose memory after a task passes this is replaced (src/pool/memory.ts). */
  workerMemoryLimitBytes: number;
  shutdownTimeoutMs: number;
  logLevel: LogLevel;
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
  /** The fingerprint detector's time limit in verify (a picture past it is reported not examined, with a warning). */
  fingerprintTimeoutMs: number;
  /** Room one account's bodies still arriving may hold of maxInflightBytes (0: no limit). */
  maxArrivingBytesPerAccount: number;
  /** Room one client address's bodies still arriving may hold of maxInflightBytes (0: no limit). */
  maxArrivingBytesPerAddress: number;
  /** Slowest average rate (bytes/s) a request body may arrive at after its first seconds (0: no floor). */
  minUploadBytesPerSecond: number;
  /** What protect does to Content Credentials (C2PA): add a signed update manifest, refuse (409), or break them with a warning. */
  c2paMode: C2paMode;
  /** Optional PEM certificate chain (end entity first) to sign C2PA update manifests with (else the data dir's own). */
  c2paCertFile: string | undefined;
  /** Its PEM private key (ECDSA P-256/384/521 or Ed25519); set with c2paCertFile or not at all. */
  c2paKeyFile: string | undefined;
  /** The tdm:policy URL the TDMRep layer writes beside tdm:reservation (none: the reservation alone). */
  tdmPolicy: string | undefined;
  /** The uses the Content Credentials layer's new manifest states in its cawg.training-mining assertion. */
  c2paTrainingMining: TrainingMining;
  /** postgres://... : the PostgreSQL store shared by several instances (docs/scaling.md); undefined = the SQLite file in dataDir. */
  databaseUrl: string | undefined;
  storeTimeoutMs: number;
  // Scans (src/scans/settings.ts)
  scanDailyLimit: number;
  scanServiceDailyLimit: number;
  scanMaxImages: number;
  scanMaxBytes: number;
  scanMaxWallMs: number;
  scanMaxImageBytes: number;
  scanMaxRedirects: number;
  scanPerHostConcurrency: number;
  scanPerHostDelayMs: number;
  scanAllowNetworks: string[];
  scanAllowLocal: boolean;
  scanClockOffsetMs: number;
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

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Multipart framing (boundaries, part headers) a request body may carry on top of the image limit. */
export const MULTIPART_SLACK_BYTES = 64 * 1024;

/** The page size request memory is handed out in. */
export const PAGE_BYTES = 4096;

const pages = (n: number): number => Math.ceil(n / PAGE_BYTES) * PAGE_BYTES;

/**
 * Room for the answer to a protect of a `bodyBytes` request body: the base64 of the body plus the
 * metadata growth protect allows (more is refused, output_too_large), and 4 KiB of JSON fields. The image
 * inside the body is smaller than the body, so every answer protect gives fits.
 */
export function answerBytesFor(bodyBytes: number): number {
  return Math.ceil((bodyBytes + MAX_PROTECT_GROWTH_BYTES) / 3) * 4 + 4096;
}

/**
 * The in-flight memory one request of a `bodyBytes` body takes while admitted: its body and, for a
 * protect, its answer, each in whole pages. The one formula for request memory: admission uses it, and
 * OPTMARK_MAX_INFLIGHT_BYTES must hold at least one largest protect.
 */
export function inflightBytesFor(bodyBytes: number, withAnswer: boolean): number {
  return pages(bodyBytes) + (withAnswer ? pages(answerBytesFor(bodyBytes)) : 0);
}

const MiB = 1024 ** 2;

const cores = (): number => Math.max(1, availableParallelism());

/**
 * What one client's requests whose body is still arriving may hold (their body's and answer's room): half
 * the in-flight memory by default, and never less than one largest protect.
 */
function arrivingShare(c: Earlier): number {
  return Math.max(inflightBytesFor(c.maxUploadBytes! + MULTIPART_SLACK_BYTES, true), Math.floor(c.maxInflightBytes! / 2));
}

const arrivingShareParser: Parser<number> = (raw, c) => {
  const n = wholeNumber(0, 64 * 1024 ** 3)(raw, c);
  const largest = inflightBytesFor(c.maxUploadBytes! + MULTIPART_SLACK_BYTES, true);
  // A share below one largest protect would keep that client from ever sending one.
  if (n !== 0 && n < largest) throw new Invalid(`must be 0 (no limit) or at least ${largest}: one largest upload plus its answer`);
  return n;
};

/** Every setting, in the order they load and are documented. */
export const SETTINGS: readonly Setting[] = [
  setting({
    variable: 'OPTMARK_HOST',
    key: 'host',
    shown: '0.0.0.0',
    fallback: () => '0.0.0.0',
    parse: (raw) => {
      if (!/^[0-9A-Za-z.:-]+$/.test(raw)) throw new Invalid(`not a host name or address: ${JSON.stringify(raw)}`);
      return raw;
    },
    doc: 'Address to listen on.',
  }),
  setting({
    variable: 'OPTMARK_PORT',
    key: 'port',
    shown: '8080',
    fallback: () => 8080,
    parse: wholeNumber(0, 65535),
    doc: 'Port to listen on (0 picks a free one).',
  }),
  setting({
    variable: 'OPTMARK_REUSE_PORT',
    key: 'reusePort',
    shown: 'off',
    fallback: () => false,
    parse: onOff,
    doc: 'Share the port with other processes on purpose (SO_REUSEPORT); off, a port in use stops the start.',
  }),
  setting({
    variable: 'OPTMARK_DATA_DIR',
    key: 'dataDir',
    shown: './data',
    fallback: () => resolve('./data'),
    parse: path,
    doc: 'SQLite store, signing keys and fingerprint secret.',
  }),
  setting({
    variable: 'OPTMARK_MAX_UPLOAD_BYTES',
    key: 'maxUploadBytes',
    shown: '26214400',
    fallback: () => 26_214_400,
    parse: wholeNumber(1024, 1024 ** 3),
    doc: 'Largest accepted upload (25 MiB); a larger one is answered 413.',
  }),
  setting({
    variable: 'OPTMARK_MAX_PIXELS',
    key: 'maxPixels',
    shown: '100000000',
    fallback: () => 100_000_000,
    parse: wholeNumber(1, 2 ** 40),
    doc: 'Pixel budget of any decode (verify detector, layers).',
  }),
  setting({
    variable: 'OPTMARK_POOL_SIZE',
    key: 'poolSize',
    shown: 'CPU cores',
    fallback: cores,
    parse: wholeNumber(1, 256),
    doc: 'Worker threads doing all per-byte work.',
  }),
  setting({
    variable: 'OPTMARK_QUEUE_LENGTH',
    key: 'queueLength',
    shown: '8 x pool size',
    fallback: (c) => c.poolSize! * 8,
    parse: wholeNumber(0, 1_000_000),
    doc: 'Tasks that may wait for a worker; beyond it 503 + Retry-After.',
  }),
  setting({
    variable: 'OPTMARK_MAX_INFLIGHT_BYTES',
    key: 'maxInflightBytes',
    shown: '384 MiB (at least 4 x upload limit)',
    fallback: (c) => Math.max(384 * MiB, 4 * c.maxUploadBytes!),
    parse: (raw, c) => {
      const n = wholeNumber(1024, 64 * 1024 ** 3)(raw, c);
      const one = inflightBytesFor(c.maxUploadBytes! + MULTIPART_SLACK_BYTES, true);
      if (n < one) throw new Invalid(`must be at least ${one}: one largest upload plus its base64 answer`);
      return n;
    },
    doc: 'Memory for the uploads and protect answers in flight together; full means 503 + Retry-After.',
  }),
  setting({
    variable: 'OPTMARK_WARM_INFLIGHT_BYTES',
    key: 'warmInflightBytes',
    shown: '32 MiB',
    fallback: (c) => Math.min(32 * MiB, c.maxInflightBytes!),
    parse: wholeNumber(0, (c) => c.maxInflightBytes!),
    doc: 'Of that memory, what stays resident while idle (the rest goes back to the OS after 2 s quiet).',
  }),
  setting({
    variable: 'OPTMARK_MIN_UPLOAD_BYTES_PER_SECOND',
    key: 'minUploadBytesPerSecond',
    shown: '32768',
    fallback: () => 32 * 1024,
    parse: wholeNumber(0, 1024 ** 3),
    doc: 'A body arriving slower on average, counted from 5 s after its headers, is answered 408 upload_too_slow and its connection closed (0: no floor).',
  }),
  setting({
    variable: 'OPTMARK_MAX_ARRIVING_BYTES_PER_ACCOUNT',
    key: 'maxArrivingBytesPerAccount',
    shown: 'half the in-flight memory',
    fallback: (c) => arrivingShare(c),
    parse: arrivingShareParser,
    doc: 'Of that memory, what requests of one account (all its keys) whose body is still arriving may hold (the room their bytes so far took; a body declared up to 2 MiB, and its answer, from the start); beyond it 503 for that account (0: no limit).',
  }),
  setting({
    variable: 'OPTMARK_MAX_ARRIVING_BYTES_PER_ADDRESS',
    key: 'maxArrivingBytesPerAddress',
    shown: 'half the in-flight memory',
    fallback: (c) => arrivingShare(c),
    parse: arrivingShareParser,
    doc: "The same per client address (behind a proxy every client has the proxy's: set 0 there, and bound clients at the proxy).",
  }),
  setting({
    variable: 'OPTMARK_TASK_TIMEOUT_MS',
    key: 'taskTimeoutMs',
    shown: '30000',
    fallback: () => 30_000,
    parse: wholeNumber(100, 3_600_000),
    doc: 'A task running longer (from its start) is aborted, answered 422, and its worker replaced.',
  }),
  setting({
    variable: 'OPTMARK_WORKER_MEMORY_LIMIT_BYTES',
    key: 'workerMemoryLimitBytes',
    shown: '512 MiB',
    fallback: () => 512 * MiB,
    parse: wholeNumber(16 * MiB, 64 * 1024 ** 3),
    doc: "A worker whose memory after a task (JS heap in use + the C2PA reader's wasm memory, which never shrinks) passes this gets no further task and is replaced once idle (metric optmark_pool_memory_recycles).",
  }),
  setting({
    variable: 'OPTMARK_SHUTDOWN_TIMEOUT_MS',
    key: 'shutdownTimeoutMs',
    shown: '10000',
    fallback: () => 10_000,
    parse: wholeNumber(0, 3_600_000),
    doc: 'How long SIGTERM/SIGINT waits for in-flight requests.',
  }),
  setting({
    variable: 'OPTMARK_LOG_LEVEL',
    key: 'logLevel',
    shown: 'info',
    fallback: (): LogLevel => 'info',
    parse: (raw) => {
      const level = raw.toLowerCase();
      if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Invalid(`expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
      return level as LogLevel;
    },
    doc: 'fatal, error, warn, info, debug, trace or silent.',
  }),
  setting({
    variable: 'OPTMARK_ALLOW_UWS_FALLBACK',
    key: 'allowUwsFallback',
    shown: 'off',
    fallback: () => false,
    parse: onOff,
    doc: "Allow uWebSockets.js's slow pure-JS fallback.",
  }),
  setting({
    variable: 'OPTMARK_BOOTSTRAP',
    key: 'bootstrap',
    shown: 'on',
    fallback: () => true,
    parse: onOff,
    doc: 'On an empty store, create a "default" pro account and one API key (shown on a terminal, else written to bootstrap-key.txt in the data dir).',
  }),
  setting({
    variable: 'OPTMARK_DEFAULT_PROTECT_LIMIT',
    key: 'defaultProtectLimit',
    shown: '10000',
    fallback: () => 10_000,
    parse: wholeNumber(0, 2 ** 31),
    doc: 'Monthly protects per account unless overridden.',
  }),
  setting({
    variable: 'OPTMARK_DEFAULT_VERIFY_LIMIT',
    key: 'defaultVerifyLimit',
    shown: '50000',
    fallback: () => 50_000,
    parse: wholeNumber(0, 2 ** 31),
    doc: 'Monthly verifies per account unless overridden.',
  }),
  setting({
    variable: 'OPTMARK_SIGNING_KEY_FILE',
    key: 'signingKeyFile',
    shown: '(data dir)',
    fallback: () => undefined,
    parse: path,
    doc: 'PEM Ed25519 private key for provenance tags; a named file that does not load stops the start.',
  }),
  setting({
    variable: 'OPTMARK_FINGERPRINT_SECRET_FILE',
    key: 'fingerprintSecretFile',
    shown: '(data dir)',
    fallback: () => undefined,
    parse: path,
    doc: 'Secret the fingerprint pattern is derived from; a named file that does not load stops the start.',
  }),
  setting({
    variable: 'OPTMARK_FINGERPRINT_DETECT',
    key: 'fingerprintDetect',
    shown: 'on',
    fallback: () => true,
    parse: onOff,
    doc: 'Run the fingerprint detector in verify.',
  }),
  setting({
    variable: 'OPTMARK_FINGERPRINT_TIMEOUT_MS',
    key: 'fingerprintTimeoutMs',
    shown: '10000',
    fallback: () => 10_000,
    parse: wholeNumber(1, 600_000),
    doc: 'The fingerprint detector stops past this (the decode abandoned, the cores not started); verify then reports it not examined with the warning fingerprint_timeout.',
  }),
  setting({
    variable: 'OPTMARK_C2PA',
    key: 'c2paMode',
    shown: 'update',
    fallback: (): C2paMode => 'update',
    parse: (raw) => {
      const v = raw.toLowerCase();
      if (!(C2PA_MODES as readonly string[]).includes(v)) throw new Invalid(`expected one of ${C2PA_MODES.join(', ')}, got ${JSON.stringify(raw)}`);
      return v as C2paMode;
    },
    doc: 'Content Credentials on protect: update (add a signed update manifest), refuse (409), invalidate (write anyway, warn) (docs/c2pa.md).',
  }),
  setting({
    variable: 'OPTMARK_C2PA_CERT_FILE',
    key: 'c2paCertFile',
    shown: '(data dir: a private CA)',
    fallback: () => undefined,
    parse: path,
    doc: 'PEM certificate chain, signer first, for C2PA update manifests; with OPTMARK_C2PA_KEY_FILE.',
  }),
  setting({
    variable: 'OPTMARK_C2PA_KEY_FILE',
    key: 'c2paKeyFile',
    shown: '(data dir)',
    fallback: (c) => {
      if (c.c2paCertFile !== undefined) throw new Invalid('not set, but OPTMARK_C2PA_CERT_FILE is: set both or neither');
      return undefined;
    },
    parse: (raw, c) => {
      if (c.c2paCertFile === undefined) throw new Invalid('set, but OPTMARK_C2PA_CERT_FILE is not: set both or neither');
      return path(raw, c);
    },
    doc: 'PEM private key (ECDSA P-256/384/521 or Ed25519) of that chain; set both or neither. A pair that does not load stops the start.',
  }),
  setting({
    variable: 'OPTMARK_TDM_POLICY',
    key: 'tdmPolicy',
    shown: '(none)',
    fallback: () => undefined,
    parse: (raw) => {
      try {
        return checkPolicyUrl(raw);
      } catch (err) {
        throw new Invalid((err as Error).message.replace(/^--policy /, ''));
      }
    },
    doc: 'URL of your text-and-data-mining terms, written as tdm:policy by the TDMRep layer (mark --tdmrep, the dashboard) (docs/signals.md).',
  }),
  setting({
    variable: 'OPTMARK_C2PA_TRAINING_MINING',
    key: 'c2paTrainingMining',
    shown: '(all four notAllowed)',
    fallback: () => NOT_ALLOWED,
    parse: (raw) => {
      try {
        return parseTrainingMining(raw);
      } catch (err) {
        throw new Invalid((err as Error).message);
      }
    },
    doc: 'Uses the Content Credentials layer states for a new manifest, e.g. ai_inference=allowed (others stay notAllowed) (docs/signals.md).',
  }),
  setting({
    variable: 'OPTMARK_DATABASE_URL',
    key: 'databaseUrl',
    shown: '(none: SQLite in the data dir)',
    fallback: () => undefined,
    parse: (raw) => {
      if (!/^postgres(ql)?:\/\//.test(raw)) throw new Invalid('expected a postgres:// URL (postgres://user:password@host:5432/database)');
      return raw;
    },
    doc: 'postgres://user:pass@host:5432/db[?schema=s&pool=10&synchronous_commit=on]: the store shared by several instances (docs/scaling.md).',
  }),
  setting({
    variable: 'OPTMARK_STORE_TIMEOUT_MS',
    key: 'storeTimeoutMs',
    shown: '5000',
    fallback: () => 5000,
    // At most 10 s: a PostgreSQL statement must end well within an instance's 15 s lease.
    parse: wholeNumber(100, 10_000),
    doc: "How long a request waits for the store (SQLite: another process's write lock; PostgreSQL: a statement, a pooled connection) before 503.",
  }),
  ...VAULT_SETTINGS,
  ...SCAN_SETTINGS,
];

type Env = Record<string, string | undefined>;

/** Reads and validates the configuration; throws ConfigError naming the offending variable. */
export function loadConfig(env: Env = process.env): Config {
  const loaded: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const raw = env[s.variable]?.trim();
    try {
      loaded[s.key] = raw === undefined || raw === '' ? s.fallback(loaded as Earlier) : s.parse(raw, loaded as Earlier);
    } catch (err) {
      if (err instanceof Invalid) throw new ConfigError(s.variable, err.message);
      throw err;
    }
  }
  return loaded as unknown as Config;
}

/** The settings as `optmark serve --help` lists them, one per line. */
export function settingsHelp(): string {
  const width = Math.max(...SETTINGS.map((s) => s.variable.length));
  const lines = SETTINGS.map((s) => `  ${s.variable.padEnd(width)}  ${s.doc} (default: ${s.shown})`);
  return `\nSettings (environment variables; docs/configuration.md has the details):\n${lines.join('\n')}\n`;
}

/** docs/configuration.md, generated from the table (`npm run docs:config`; a test compares the two). */
export function configurationDoc(): string {
  const cell = (text: string): string => text.replace(/\|/g, '\\|');
  return [
    '# Configuration',
    '',
    '<!-- Generated from SETTINGS in src/config.ts by `npm run docs:config`; edit the table there, not this file. -->',
    '',
    'optmark reads its settings from environment variables when `optmark serve` (and the other commands)',
    'start. An empty value counts as unset. A value that does not parse stops the start with a message naming',
    'the variable. `optmark serve --help` lists the same settings.',
    '',
    '| variable | default | what it does |',
    '|---|---|---|',
    ...SETTINGS.map((s) => `| \`${s.variable}\` | ${cell(s.shown)} | ${cell(s.doc)} |`),
    '',
    'On/off settings take `1`/`0`, `true`/`false`, `yes`/`no` or `on`/`off`. Sizes are in bytes, times in',
    'milliseconds. Request memory (`OPTMARK_MAX_INFLIGHT_BYTES`) must hold at least one largest protect: the',
    'upload limit plus 64 KiB of multipart framing, and room for its answer (that body plus the 1 MiB protect',
    'may add to a file, base64-encoded, and 4 KiB of JSON).',
    '',
  ].join('\n');
}
