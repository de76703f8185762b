/**
 * The shapes a repository scan passes between its parts (docs/scans.md):
 *
 *   source (./sources/: git, page, manifest, tar, local) ── Candidate, in a fixed order
 *     ──> Candidate.load() (through the Fetcher for anything over HTTP) ──> Loaded bytes + served signals
 *     ──> ./analyse.ts: the verify report, sha256, the account's record ──> ScanItem
 *     ──> the CLI's report (src/commands/scan.ts) or the job's results (./jobs/)
 *
 * A source enumerates lazily and deterministically, so that a job cut in chunks can start a chunk at
 * any index (`candidates(from)`): the ones before are passed over without being loaded.
 */
import type { Readable } from 'node:stream';
import type { VaultMatch } from '../vault/recognition.js';
import type { AddressPolicy } from './net/address.js';

/** Codes a scan or an item fails with (stable strings; docs/scans.md lists them). */
export type ScanErrorCode =
  | 'invalid_source'
  | 'target_not_allowed'
  | 'local_source_not_allowed'
  | 'robots_disallowed'
  | 'fetch_failed'
  | 'http_status'
  | 'too_many_redirects'
  | 'timeout'
  | 'too_large'
  | 'budget_exceeded'
  | 'not_an_image'
  | 'lfs_pointer'
  | 'unreadable'
  | 'git_failed'
  | 'archive_invalid'
  /** A symbolic or hard link (git, tar, a local folder): never followed. */
  | 'link_not_followed'
  /** A git submodule entry: never cloned. */
  | 'submodule';

export class ScanError extends Error {
  readonly code: ScanErrorCode;
  constructor(code: ScanErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** Per-scan limits (each a documented setting; a scan's options may lower, never raise them; perHostDelayMs the other way round, src/scans/limits.ts). */
export interface ScanLimits {
  maxImages: number;
  /** Bytes fetched or read in all (pages, manifests, archives, clones, images). */
  maxBytes: number;
  maxWallMs: number;
  maxImageBytes: number;
  maxRedirects: number;
  perHostConcurrency: number;
  perHostDelayMs: number;
  maxHtmlBytes: number;
  maxPages: number;
  maxDepth: number;
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

export interface FetchOptions {
  /** The response body's limit (after decompression); past it the fetch fails `too_large`. */
  maxBytes: number;
  /** Skip the robots.txt check (robots.txt itself, ai.txt, tdmrep.json). */
  ignoreRobots?: boolean;
}

export interface FetchResult {
  /** The URL answered, after redirects. */
  url: string;
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface FetchStream {
  url: string;
  status: number;
  headers: Record<string, string>;
  /** The decompressed body, failing `too_large` or `timeout` past the limits. */
  body: Readable;
}

/** The one HTTP client of scans (./net/): address rules on the connected socket, budgets, robots.txt. */
export interface Fetcher {
  get(url: string, options: FetchOptions): Promise<FetchResult>;
  stream(url: string, options: FetchOptions): Promise<FetchStream>;
  /** The signals served for `url` by its origin and its response headers (stable strings, ./served.ts). */
  servedSignals(url: string, headers: Record<string, string>): Promise<string[]>;
  /** Bytes fetched so far (counted against ScanLimits.maxBytes). */
  readonly bytes: number;
  /** Closes the kept-alive connections (the scan, or the chunk, is done with this fetcher). */
  close(): void;
}

export interface ScanContext {
  fetcher: Fetcher;
  limits: ScanLimits;
  /** The scan's own temporary folder: nothing is written outside it. */
  folder: string;
  /** Local folders, files and file:// URLs are allowed (the CLI; the server only where the operator allows). */
  allowLocal: boolean;
  /** Follow same-origin links from a page (up to limits.maxPages / maxDepth). */
  followLinks: boolean;
  signal: AbortSignal;
  /**
   * The address rule for connections a source makes itself (git: the host is resolved and checked, then
   * git is pinned to that address). Absent: the default policy, which admits no private network.
   */
  policy?: AddressPolicy;
  /** Told of what was passed over and why (robots.txt, not an image, an LFS pointer...). */
  skipped(location: string, code: ScanErrorCode, message: string): void;
}

export interface Loaded {
  bytes: Uint8Array;
  /** Signals served with the image (HTTP sources only): `x-robots-tag:noai`, `tdm-reservation`, `robots.txt`, ... */
  servedSignals: string[];
}

export interface Candidate {
  /** Its index in the source's order. */
  index: number;
  /** Where it was found: a URL, or `repo-url#path`, `shard-url#member`, a local path. */
  location: string;
  /** Loads the bytes (throws ScanError: fetch failures, too_large, lfs_pointer...). */
  load(): Promise<Loaded>;
}

export interface OpenedSource {
  kind: 'git' | 'page' | 'manifest' | 'tar' | 'local';
  /** Candidates in a fixed order from index `from`; those before are passed over, not loaded. */
  candidates(from: number): AsyncIterable<Candidate>;
  close(): Promise<void>;
}

/** One image of a scan's results (docs/scans.md; GET /api/v1/scans/{id}/results). */
export interface ScanItem {
  location: string;
  sha256: string | null;
  format: string | null;
  optedOut: boolean;
  /** Embedded opt-out signals (the verify report's). */
  signals: string[];
  servedSignals: string[];
  provenance: unknown;
  fingerprint: unknown;
  c2pa: unknown;
  /** The account's record whose produced SHA-256 this is. */
  record: { id: string; createdAt: string } | null;
  /**
   * The account's vault originals the picture looks like, nearest first ([] none); null where no vault
   * was searched (the CLI, an account that keeps no originals, an image that could not be read).
   */
  vault: VaultMatch[] | null;
  error: { code: string; message: string } | null;
}

export interface ScanCounts {
  images: number;
  optedOut: number;
  servedOptOut: number;
  noOptOut: number;
  ours: number;
  oursStripped: number;
  failed: number;
  skipped: number;
  /** Images that look like one of the account's vault originals (the item's `vault` not empty). */
  inVault: number;
}
