/**
 * The typed messages between the event-loop thread and the image workers. Both sides import this one
 * module; no `any` crosses the boundary. Errors come back as values with a stable code, because thrown
 * errors lose their class in structured clone.
 */
import type { ErrorShape } from '../errors.js';

/** A byte range of the pool's shared arena (src/pool/arena.ts), which every worker maps once. */
export interface ArenaRange {
  offset: number;
  length: number;
}

export interface ProtectTask {
  kind: 'protect';
  /** The request body (multipart/form-data), in the arena; the worker parses it in place. */
  input: ArenaRange;
  /** The request's Content-Type (its boundary). */
  contentType: string;
  /** Where to write the response body, when the event-loop thread could reserve room for it. */
  output: ArenaRange | undefined;
}

export interface VerifyTask {
  kind: 'verify';
  /** The request body (multipart/form-data), in the arena. */
  input: ArenaRange;
  contentType: string;
}

/** The layer path (CLI `mark`, dashboard): the opt-out field plus optional layers, raw bytes back. */
export interface MarkTask {
  kind: 'mark';
  input: Uint8Array;
  provenance: boolean;
  fingerprint: boolean;
}

/**
 * The dashboard's mark (src/pipeline/dashboard.ts): the multipart body in the arena, the batch's layers,
 * and the id the event-loop thread gave the record it will store on success.
 */
export interface DashboardMarkTask {
  kind: 'dashboard-mark';
  input: ArenaRange;
  contentType: string;
  provenance: boolean;
  fingerprint: boolean;
  batchId: string;
  recordId: string;
}

/** What the event-loop thread needs to record a dashboard mark (the body carries the same). */
export interface MarkedImage {
  sha256: string;
  filename: string;
  mimeType: string;
  bytes: number;
  layers: string[];
  originalName: string;
  provenanceKeyId: string | null;
  markedAt: string;
}

/** Runs the hot paths once so the first real requests find them compiled. */
export interface WarmupTask {
  kind: 'warmup';
}

export type Task = ProtectTask | VerifyTask | MarkTask | DashboardMarkTask | WarmupTask;

/** A finished HTTP response body (UTF-8 JSON), built in the worker and moved back. */
export interface BodyResult {
  ok: true;
  kind: 'body';
  body: Uint8Array;
  /** Set by the dashboard's mark: what its record needs. */
  mark?: MarkedImage;
}

/** A response body written into the task's output range of the arena. */
export interface ArenaBodyResult {
  ok: true;
  kind: 'arena-body';
  length: number;
}

export interface MarkResult {
  ok: true;
  kind: 'marked';
  bytes: Uint8Array;
  mimeType: string;
  extension: string;
  layers: string[];
}

export interface TaskFailure {
  ok: false;
  error: ErrorShape;
  /** Internals of an unexpected failure, for the server log only; never sent to clients. */
  detail?: string;
}

export interface WarmupResult {
  ok: true;
  kind: 'warm';
  threadId: number;
}

/** Every result carries the worker's own time on the task, for the answer's Server-Timing. */
export type TaskResult = (BodyResult | ArenaBodyResult | MarkResult | WarmupResult | TaskFailure) & { workMs?: number };

/** What every worker is started with (piscina workerData). */
export interface WorkerInit {
  dataDir: string;
  /** The image limit (bytes): a larger image part is refused with 413. */
  maxUploadBytes: number;
  maxPixels: number;
  signingKeyFile: string | undefined;
  fingerprintSecretFile: string | undefined;
  fingerprintDetect: boolean;
  /** The pool's shared arena, shared (not copied) with every worker once, at start. */
  arena?: SharedArrayBuffer | undefined;
}
