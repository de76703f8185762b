/**
 * The typed messages between the event-loop thread and the image workers. Both sides import this one
 * module; no `any` crosses the boundary. Errors come back as values with a stable code, because thrown
 * errors lose their class in structured clone.
 */
import type { C2paMode } from '../c2pa/modes.js';
import type { ErrorShape } from '../errors.js';
import type { LayerSettings } from '../pipeline/layers-live.js';
import type { DashboardMarkOptions, MarkedImage } from '../pipeline/dashboard.js';
import type { MarkOptions, Marked } from '../pipeline/mark.js';
import type { TrainingMining } from '../signals/training.js';
import type { PdqResult } from '../vault/pdq.js';
import type { AnswerRef, BytesRef, TransferShare } from '../transfer/index.js';

export interface ProtectTask {
  kind: 'protect';
  /** The request body (multipart/form-data); the worker parses it in place. */
  input: BytesRef;
  /** The request's Content-Type (its boundary). */
  contentType: string;
  /** Room for the answer. */
  output: BytesRef | undefined;
  /** Answer the marked bytes themselves (`Accept: image/*`), their description in `headers`, instead of JSON. */
  raw?: boolean;
  /** Return the SHA-256 of the uploaded image (an Idempotency-Key request). */
  digest?: boolean;
}

export interface VerifyTask {
  kind: 'verify';
  /** The request body (multipart/form-data). */
  input: BytesRef;
  contentType: string;
  /** `?fingerprint=skip`: the pixel detector is left out (the fingerprint reported as not examined). */
  skipFingerprint?: boolean;
  /** Return the SHA-256 of the uploaded image (an Idempotency-Key request). */
  digest?: boolean;
  /** `?vault=match`: also the image's perceptual hash (src/vault/phash.ts), for the account's vault to be searched. */
  perceptualHash?: boolean;
}

/** The perceptual hash of an image file (the vault's ingest): copied to the worker, the caller keeps its bytes. */
export interface PhashTask {
  kind: 'phash';
  input: Uint8Array;
}

/** The layer path (CLI `mark`, dashboard): the opt-out field plus optional layers, raw bytes back. */
export interface MarkTask extends MarkOptions {
  kind: 'mark';
  /** Moved (transferred) to the worker. */
  input: Uint8Array;
}

/**
 * The dashboard's mark (src/pipeline/dashboard.ts): the multipart body, the batch's layers, and the id
 * the event-loop thread gave the record it will store on success.
 */
export interface DashboardMarkTask extends DashboardMarkOptions {
  kind: 'dashboard-mark';
  input: BytesRef;
}

/** Runs the hot paths once so the first real requests find them compiled. */
export interface WarmupTask {
  kind: 'warmup';
}

export type Task = ProtectTask | VerifyTask | MarkTask | DashboardMarkTask | PhashTask | WarmupTask;

/** A task as posted: the pool numbers it, and the worker stamps its start (./starts.ts; the deadline counts from then). */
export type Posted = Task & { token?: number };

/** An HTTP answer's body (UTF-8 JSON), in place or as bytes moved back. */
export interface AnswerResult {
  ok: true;
  kind: 'answer';
  answer: AnswerRef;
  /** A raw protect answer's own headers (Content-Type, Content-Disposition, Repr-Digest, Optmark-Signals). */
  headers?: Record<string, string>;
  /** Headers a JSON answer adds (protect: Optmark-Content-Credentials). */
  extraHeaders?: Record<string, string>;
  /** Set by the dashboard's mark: what its record needs. */
  mark?: MarkedImage;
  /** The uploaded image's SHA-256 (hex), when the task asked for it. */
  uploadSha256?: string;
  /** The uploaded image's perceptual hash, when the task asked for it (null: not an image sharp decodes). */
  perceptualHash?: PdqResult | null;
}

export interface PhashResult {
  ok: true;
  kind: 'phash';
  /** null: not an image sharp decodes. */
  phash: PdqResult | null;
}

export interface MarkResult extends Marked {
  ok: true;
  kind: 'marked';
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

/**
 * Every result carries the worker's own time on the task, for the answer's Server-Timing, and its memory
 * after the task (src/pool/memory.ts), by which the pool replaces a worker past its limit.
 */
export type TaskResult = (AnswerResult | MarkResult | PhashResult | WarmupResult | TaskFailure) & { workMs?: number; memoryBytes?: number };

/** What every worker is started with (piscina workerData). */
export interface WorkerInit extends LayerSettings {
  /** The image limit (bytes): a larger image part is refused with 413. */
  maxUploadBytes: number;
  /** The workers' log level (default info). */
  logLevel?: string;
  /** What protect does to Content Credentials (OPTMARK_C2PA; default update). */
  c2paMode?: C2paMode;
  /** The configured C2PA signing chain and key (else the data directory's own identity). */
  c2paCertFile?: string | undefined;
  c2paKeyFile?: string | undefined;
  /** The dashboard's signal layers' settings (OPTMARK_TDM_POLICY, OPTMARK_C2PA_TRAINING_MINING; default all notAllowed). */
  tdmPolicy?: string | undefined;
  c2paTrainingMining?: TrainingMining | undefined;
  /** The request memory, shared (not copied) with every worker once, at start. */
  transfer?: TransferShare | undefined;
  /** Where the worker stamps the tasks it starts (the pool's TaskStarts). */
  starts?: SharedArrayBuffer | undefined;
}
