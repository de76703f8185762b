/**
 * Warms an image worker's protect path as a request takes it, in shared memory (src/pipeline/warmup.ts
 * warms the rest on ordinary Buffers).
 */
import { answerBytesFor } from '../config.js';
import { sha256Hex } from '../pipeline/body.js';
import type { CredentialsPolicy } from '../pipeline/credentials.js';
import { runProtect } from '../pipeline/protect.js';
import { parseUpload, safeBasename } from '../pipeline/upload.js';
import { samples } from '../pipeline/warmup.js';

/** Protects along a request's own path; enough for V8 to optimise it before the first request. */
const PROTECT_ROUNDS = 600;

/**
 * A protect request's own path, as an image worker runs it: the plain form parsed in place in shared
 * memory, the JSON answer written into shared room. V8 optimises code for the kinds of arrays it has
 * seen, so warming it on ordinary Buffers left this path to be compiled again during the first
 * requests (TurboFan on background threads, and slower code meanwhile). Throws if an answer does not
 * carry the file's bytes.
 */
export async function warmUpProtect(policy: CredentialsPolicy, maxUploadBytes: number, rounds = PROTECT_ROUNDS): Promise<void> {
  const boundary = '----optmark-warmup-protect';
  const contentType = `multipart/form-data; boundary=${boundary}`;
  const forms = (await samples()).map((file, i) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="warm-${i}.img"\r\nContent-Type: image/jpeg\r\n\r\n`),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]),
  );
  const largest = Math.max(...forms.map((f) => f.length));
  const memory = new SharedArrayBuffer(largest + answerBytesFor(largest));
  const room = new Uint8Array(memory, largest);
  let last: Uint8Array | undefined;
  for (let i = 0; i < rounds; i++) {
    const form = forms[i % forms.length]!;
    const body = new Uint8Array(memory, 0, form.length);
    Buffer.from(memory, 0, form.length).fill(form);
    const upload = await parseUpload(body, contentType, maxUploadBytes);
    last = (await runProtect(upload.bytes, safeBasename(upload.filename), policy, room, maxUploadBytes)).body;
  }
  if (!last) return;
  const answer = JSON.parse(Buffer.from(last).toString('utf8')) as { imageBase64: string; sha256: string };
  if (sha256Hex(Buffer.from(answer.imageBase64, 'base64')) !== answer.sha256) throw new Error('protect warm-up: the answer does not carry its bytes');
}
