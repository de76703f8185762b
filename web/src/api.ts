/**
 * The dashboard's calls to the server. The key travels only in the Authorization header of
 * same-origin requests; it is never put in a URL.
 */
import type { CredentialsOutcome } from '../../src/c2pa/modes';
import type { RecordMatch } from '../../src/store/records';

// The server's own types (type-only imports of dependency-free modules: nothing of the server is bundled).
export type { CredentialsOutcome } from '../../src/c2pa/modes';
export type { MarkRecord, RecordMatch } from '../../src/store/records';

export interface Counter {
  used: number;
  limit: number;
  remaining: number;
}

export interface AccountInfo {
  account: { name: string; plan: string };
  key: { prefix: string };
  usage: { month: string; resetsAt: string; protect: Counter; verify: Counter };
  limits: { batchSize: number; maxUploadBytes: number; concurrency: number };
}

export interface VerifyReport {
  optedOut: boolean;
  signals: string[];
  provenance: { present: boolean; valid: boolean; verifiable: boolean };
  fingerprint: { present: boolean; confidence: number; blocks: number };
  /** Content Credentials: a manifest store, whether it validates, its strictest training use. */
  c2pa: { present: boolean; valid: boolean; trainingMining: 'notAllowed' | 'constrained' | 'allowed' | null };
  /** Reservations besides the IPTC field: `c2pa.trainingMining`, `tdmrep.reservation`. */
  otherSignals: string[];
  sha256: string;
  record?: RecordMatch | null;
  warnings?: Array<{ code: string; message: string }>;
  /** `?vault=match`: the account's vault originals this picture looks like, nearest first. */
  vault?: VaultMatch[];
}

/** A vault original within the match distance of a verified picture (PDQ bits differing, of 256). */
export interface VaultMatch {
  id: string;
  name: string;
  distance: number;
  record: string | null;
}

export interface Batch {
  id: string;
  size: number;
  layers: { provenance: boolean; fingerprint: boolean; tdmrep: boolean; contentCredentials: boolean };
}

export interface MarkAnswer {
  imageBase64: string;
  mimeType: string;
  filename: string;
  sha256: string;
  signals: string[];
  layers: string[];
  bytes: number;
  originalName: string;
  record: { id: string; batchId: string; markedAt: string; provenanceKeyId: string | null };
  before: VerifyReport;
  after: VerifyReport;
  /** What happened to the input's Content Credentials (the Optmark-Content-Credentials header). */
  credentials: CredentialsOutcome;
  warnings: Array<{ code: string; message: string }>;
}

/** A refusal from the server (its `code` and plain message) or a failed connection (code "network"). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const NETWORK = 'The connection to the server failed. Check that it is running and try again.';

async function errorOf(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => null)) as { error?: unknown; code?: unknown } | null;
  const message = typeof body?.error === 'string' ? body.error : `The server answered ${res.status}.`;
  return new ApiError(res.status, typeof body?.code === 'string' ? body.code : `http_${res.status}`, message);
}

async function request(key: string, path: string, init: RequestInit = {}): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers: { ...(init.headers as Record<string, string>), Authorization: `Bearer ${key}` }, cache: 'no-store' });
  } catch {
    throw new ApiError(0, 'network', NETWORK);
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

export async function getJson<T>(key: string, path: string): Promise<T> {
  return (await request(key, path)).json() as Promise<T>;
}

export async function postJson<T>(key: string, path: string, body: unknown): Promise<T> {
  const res = await request(key, path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return res.json() as Promise<T>;
}

export async function putJson<T>(key: string, path: string, body: unknown): Promise<T> {
  const res = await request(key, path, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return res.json() as Promise<T>;
}

/** DELETE; resolves when the server answered 2xx (a 204 has no body). */
export async function del(key: string, path: string): Promise<void> {
  await request(key, path, { method: 'DELETE' });
}

/** A download: the body and the file name of its Content-Disposition, when it has one. */
export async function getFile(key: string, path: string): Promise<{ blob: Blob; name: string | undefined }> {
  const res = await request(key, path);
  return { blob: await res.blob(), name: dispositionName(res.headers.get('Content-Disposition')) };
}

/** The file name of a Content-Disposition header (RFC 6266: filename* in UTF-8 first, then filename). */
export function dispositionName(header: string | null): string | undefined {
  if (!header) return undefined;
  const star = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1]!.trim());
    } catch {
      /* a malformed escape: fall back to the plain parameter */
    }
  }
  const plain = /filename\s*=\s*("((?:[^"\\]|\\.)*)"|[^;]+)/i.exec(header);
  if (!plain) return undefined;
  return plain[2] !== undefined ? plain[2].replace(/\\(.)/g, '$1') : plain[1]!.trim();
}

export async function getBlob(key: string, path: string): Promise<Blob> {
  return (await request(key, path)).blob();
}

/** POSTs one image as multipart/form-data (part "image") and returns the JSON answer. */
export async function postImage<T>(key: string, path: string, file: File): Promise<T> {
  const form = new FormData();
  form.append('image', file, file.name);
  return (await request(key, path, { method: 'POST', body: form })).json() as Promise<T>;
}

export interface UploadHandlers {
  /** Fraction of the upload sent (0..1). */
  progress(fraction: number): void;
  /** The last byte went out: the server is working on it. */
  uploaded(): void;
}

/**
 * Uploads one image with XMLHttpRequest (fetch reports no upload progress) and resolves with the
 * parsed JSON answer; rejects with ApiError.
 */
export function uploadImage<T>(key: string, path: string, file: File, on: UploadHandlers): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    xhr.setRequestHeader('Authorization', `Bearer ${key}`);
    xhr.responseType = 'json';
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) on.progress(e.loaded / e.total);
    };
    xhr.upload.onload = () => on.uploaded();
    xhr.onload = () => {
      const body = xhr.response as { error?: unknown; code?: unknown } | null;
      if (xhr.status >= 200 && xhr.status < 300 && body) resolve(body as T);
      else {
        const message = typeof body?.error === 'string' ? body.error : `The server answered ${xhr.status}.`;
        reject(new ApiError(xhr.status, typeof body?.code === 'string' ? body.code : `http_${xhr.status}`, message));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, 'network', NETWORK));
    xhr.onabort = () => reject(new ApiError(0, 'aborted', 'The upload was cancelled.'));
    const form = new FormData();
    form.append('image', file, file.name);
    xhr.send(form);
  });
}
