/**
 * Warms a worker before the server reports ready: the first requests should not pay for module
 * initialisation and JIT compilation of the hot paths (container edits, XMP, hashing, base64).
 */
import sharp from 'sharp';
import { answerBytesFor } from '../config.js';
import { protect, read } from '../marking/engine.js';
import { protectBody, sha256Hex } from './body.js';
import type { CredentialsPolicy } from './credentials.js';
import { runProtect } from './protect.js';
import { parseUpload, safeBasename, warmUpUpload } from './upload.js';

const ROUNDS = 40;
/** Protects along a request's own path; enough for V8 to optimise it before the first request. */
const PROTECT_ROUNDS = 600;

/** Small JPEG, PNG and WebP files. */
function samples(): Promise<Buffer[]> {
  const base = sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 120, g: 80, b: 40 } } });
  return Promise.all([base.clone().jpeg().toBuffer(), base.clone().png().toBuffer(), base.clone().webp().toBuffer()]);
}

export async function warmUp(): Promise<void> {
  await warmUpUpload();
  const files = await samples();
  const big = Buffer.alloc(1 << 20, 7);
  for (let i = 0; i < ROUNDS; i++) {
    for (const s of files) {
      const p = protect(s);
      read(p.bytes);
      protect(p.bytes);
      protectBody(p.pieces, { mimeType: p.mimeType, filename: `w.${p.extension}`, signals: p.signals });
    }
    if (i % 8 === 0) {
      sha256Hex(big);
      protectBody(big, { mimeType: 'image/jpeg', filename: 'w.jpg', signals: [] });
    }
  }
}

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
