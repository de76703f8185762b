/**
 * A scan's verify on the server: the image goes to the worker pool as the same verify task
 * POST /api/v1/verify runs (a multipart body in the request memory, src/transfer/), so a scan reports
 * exactly what the API would. Only with room: the runner keeps its own tasks few (./runner.ts).
 */
import { randomBytes } from 'node:crypto';
import { OptmarkError } from '../../errors.js';
import type { ImagePool } from '../../pool/pool.js';
import type { Transfer } from '../../transfer/index.js';
import { keptHash } from '../../vault/recognition.js';
import type { ScanVerifyReport } from '../analyse.js';

/**
 * With `perceptualHash` (the account keeps vault originals) the worker also hashes the picture, as
 * verify?vault=match does, and the report carries the hash (null: featureless or undecodable).
 */
export function poolVerify(pool: ImagePool, transfer: Transfer): (bytes: Uint8Array, perceptualHash: boolean) => Promise<ScanVerifyReport> {
  return async (bytes, perceptualHash) => {
    const boundary = `optmark-scan-${randomBytes(12).toString('hex')}`;
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="image"\r\nContent-Type: image/octet-stream\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const lease = transfer.admit(head.length + bytes.length + tail.length, false);
    if (!lease) throw new OptmarkError('overloaded', 'no request memory free for a scanned image now');
    try {
      for (const part of [head, bytes, tail]) {
        const w = lease.write(part);
        if (w === 'too-large' || w === 'full') throw new OptmarkError('overloaded', 'no request memory free for a scanned image now');
      }
      const { input } = lease.seal();
      const result = await pool.run({
        kind: 'verify',
        input,
        contentType: `multipart/form-data; boundary=${boundary}`,
        ...(perceptualHash ? { perceptualHash: true } : {}),
      });
      if (!result.ok) throw new OptmarkError(result.error.code, result.error.message);
      if (result.kind !== 'answer') throw new Error(`a verify task answered ${result.kind}`);
      const report = JSON.parse(Buffer.from(lease.answer(result.answer)).toString('utf8')) as ScanVerifyReport;
      return perceptualHash ? { ...report, perceptualHash: keptHash(result.perceptualHash) } : report;
    } finally {
      lease.release();
    }
  };
}
