/**
 * The typed messages between the event-loop thread and the image workers. Both sides import this one
 * module; no `any` crosses the boundary. Errors come back as values with a stable code, because thrown
 * errors lose their class in structured clone.
 */
import type { ErrorShape } from '../errors.js';

export interface ProtectTask {
  kind: 'protect';
  input: Uint8Array;
  /** Safe base name (no extension) for the produced file. */
  basename: string;
}

export interface VerifyTask {
  kind: 'verify';
  input: Uint8Array;
}

/** The layer path (CLI `mark`, dashboard): the opt-out field plus optional layers, raw bytes back. */
export interface MarkTask {
  kind: 'mark';
  input: Uint8Array;
  provenance: boolean;
  fingerprint: boolean;
}

/** Runs the hot paths once so the first real requests find them compiled. */
export interface WarmupTask {
  kind: 'warmup';
}

export type Task = ProtectTask | VerifyTask | MarkTask | WarmupTask;

/** A finished HTTP response body (UTF-8 JSON), built in the worker and moved back. */
export interface BodyResult {
  ok: true;
  kind: 'body';
  body: Uint8Array;
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

export type TaskResult = BodyResult | MarkResult | WarmupResult | TaskFailure;

/** What every worker is started with (piscina workerData). */
export interface WorkerInit {
  dataDir: string;
  maxPixels: number;
  signingKeyFile: string | undefined;
  fingerprintSecretFile: string | undefined;
  fingerprintDetect: boolean;
}
