/**
 * The image worker (piscina): every per-byte job runs here, never on the event-loop thread. It imports
 * no HTTP, auth or store code. It turns a task's references into plain Uint8Arrays (src/transfer/worker.ts),
 * calls the pipeline's plain functions on them, and hands the answer back in place or moved (transferred),
 * never copied.
 */
import { threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import sharp from 'sharp';
import { toErrorShape } from '../src/errors.js';
import { createLogger } from '../src/log.js';
import { setNativeLog } from '../src/native/index.js';
import { LiveLayers } from '../src/pipeline/layers-live.js';
import { runDashboardMark } from '../src/pipeline/dashboard.js';
import { runMark } from '../src/pipeline/mark.js';
import { credentialsPolicy } from '../src/pipeline/credentials.js';
import { sha256Hex } from '../src/pipeline/body.js';
import { runProtect, runProtectRaw } from '../src/pipeline/protect.js';
import { parseUpload, safeBasename } from '../src/pipeline/upload.js';
import { withoutFingerprint } from '../src/pipeline/layers.js';
import { runVerify } from '../src/pipeline/verify.js';
import { perceptualHash } from '../src/vault/phash.js';
import { warmUp } from '../src/pipeline/warmup.js';
import { warmUpProtect } from '../src/transfer/warmup.js';
import { workerMemoryBytes } from '../src/pool/memory.js';
import { TaskStarts } from '../src/pool/starts.js';
import type { Posted, TaskResult, WorkerInit } from '../src/pool/tasks.js';
import { TransferViews } from '../src/transfer/worker.js';
import { NOT_ALLOWED } from '../src/signals/training.js';
import { loadXml } from '../src/xmp/packet.js';

// xmldom loads on first use elsewhere (batch marking of files without XMP never needs it); a worker
// loads it at start, as it did when it was a static import, so that no task's deadline pays for it.
loadXml();

// The pool provides the parallelism: one libvips thread per worker keeps CPU use predictable.
sharp.concurrency(1);
sharp.cache(false);

const init = workerData as WorkerInit;
const log = createLogger(init.logLevel ?? 'info', { service: 'optmark', worker: threadId });
setNativeLog((fields, message) => log.warn(fields, message));
const memory = new TransferViews(init.transfer);
const starts = init.starts && new TaskStarts(init.starts);
// Keys and secrets load once per worker, on first use or at warm-up, never per request.
const layers = new LiveLayers(init);
const signalSettings = { tdmPolicy: init.tdmPolicy, training: init.c2paTrainingMining ?? NOT_ALLOWED };
// The C2PA signing identity, read (the server created it at start) on the first file with credentials.
const credentials = credentialsPolicy(init.c2paMode, { dataDir: init.dataDir, certFile: init.c2paCertFile, keyFile: init.c2paKeyFile });

/** A view that owns its whole ArrayBuffer (a pooled or oversized one must not be transferred). */
function standalone(view: Uint8Array): Uint8Array {
  if (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && view.buffer instanceof ArrayBuffer) return view;
  const copy = new Uint8Array(view.byteLength);
  copy.set(view);
  return copy;
}

/** Marks the result's own bytes (if any) for transfer back to the event-loop thread. */
function moved(result: TaskResult): TaskResult {
  let out: TaskResult;
  if (result.ok && result.kind === 'marked') out = { ...result, bytes: standalone(result.bytes) };
  else if (result.ok && result.kind === 'answer' && 'bytes' in result.answer) out = { ...result, answer: { bytes: standalone(result.answer.bytes) } };
  else return result;
  const buffer = (out.kind === 'marked' ? out.bytes : (out as { answer: { bytes: Uint8Array } }).answer.bytes).buffer;
  return Piscina.move({
    get [Piscina.transferableSymbol]() {
      return [buffer];
    },
    get [Piscina.valueSymbol]() {
      return out;
    },
  } as unknown as ArrayBuffer) as unknown as TaskResult;
}

export default async function handle(task: Posted): Promise<TaskResult> {
  // The pool's time limit counts from here.
  if (task.token !== undefined) starts?.stamp(task.token, threadId);
  const started = performance.now();
  const result = await perform(task);
  // The worker's own time on the task (parse, mark, answer build): the event-loop thread tells it
  // apart from the wait for a worker in the answer's Server-Timing.
  result.workMs = performance.now() - started;
  result.memoryBytes = workerMemoryBytes();
  return moved(result);
}

/**
 * The uploaded image's SHA-256 for an Idempotency-Key request: the image part, not the whole body, whose
 * multipart boundary a client may draw anew for each attempt.
 */
function uploadDigest(task: { digest?: boolean }, image: Uint8Array): { uploadSha256?: string } {
  return task.digest ? { uploadSha256: sha256Hex(image) } : {};
}

async function perform(task: Posted): Promise<TaskResult> {
  try {
    switch (task.kind) {
      case 'protect': {
        const upload = await parseUpload(memory.view(task.input), task.contentType, init.maxUploadBytes);
        const digest = uploadDigest(task, upload.bytes);
        const room = task.output && memory.view(task.output);
        if (task.raw) {
          const raw = await runProtectRaw(upload.bytes, safeBasename(upload.filename), credentials, room, init.maxUploadBytes);
          return { ok: true, kind: 'answer', answer: memory.answer(raw.body, room), headers: raw.headers, ...digest };
        }
        const json = await runProtect(upload.bytes, safeBasename(upload.filename), credentials, room, init.maxUploadBytes);
        return { ok: true, kind: 'answer', answer: memory.answer(json.body, room), extraHeaders: json.headers, ...digest };
      }
      case 'verify': {
        const upload = await parseUpload(memory.view(task.input), task.contentType, init.maxUploadBytes);
        // The hash's decode runs on libvips's thread while verify reads the container here.
        const [verified, phash] = await Promise.all([
          runVerify(upload.bytes, task.skipFingerprint ? withoutFingerprint(layers) : layers),
          task.perceptualHash ? perceptualHash(upload.bytes) : undefined,
        ]);
        // verify hashes the upload for its answer: the Idempotency-Key's digest is that same SHA-256.
        return {
          ok: true,
          kind: 'answer',
          answer: { bytes: verified.body },
          ...(task.digest ? { uploadSha256: verified.sha256 } : {}),
          ...(phash !== undefined ? { perceptualHash: phash } : {}),
        };
      }
      case 'mark': {
        // The posted answer: the joined bytes, not the pieces (views of the input) a structured clone would copy too.
        const { bytes, mimeType, extension, layers: applied } = await runMark(task.input, task, layers);
        return { ok: true, kind: 'marked', bytes, mimeType, extension, layers: applied };
      }
      case 'dashboard-mark': {
        const { body, mark, headers } = await runDashboardMark(memory.view(task.input), task, layers, init.maxUploadBytes, credentials, signalSettings);
        return { ok: true, kind: 'answer', answer: { bytes: body }, mark, extraHeaders: headers };
      }
      case 'phash':
        return { ok: true, kind: 'phash', phash: await perceptualHash(task.input) };
      case 'warmup':
        await Promise.all([warmUp().then(() => warmUpProtect(credentials, init.maxUploadBytes)), layers.warm()]);
        return { ok: true, kind: 'warm', threadId };
    }
  } catch (err) {
    const error = toErrorShape(err);
    // For the server log only: an unexpected failure's stack, or why the detector could not run.
    const detail = !(err instanceof Error)
      ? undefined
      : error.code === 'internal_error'
        ? (err.stack ?? err.message)
        : error.code === 'fingerprint_unavailable'
          ? `fingerprint secret: ${String(err.cause)}`
          : undefined;
    return { ok: false, error, ...(detail ? { detail } : {}) };
  }
}
