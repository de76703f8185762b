/** A stream's first bytes, looked at without losing them: what a source is told by (gzip, tar, HTML). */
import { Readable } from 'node:stream';

/**
 * Reads at least `n` bytes of `input` (fewer when it ends first), however the stream is cut, and gives
 * them back with a stream of every byte, those first ones included. The input's error (a fetch past
 * its limit: a ScanError) reaches the returned stream as it is.
 */
export async function peek(input: Readable, n: number): Promise<{ head: Buffer; stream: Readable }> {
  const it = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first: Buffer[] = [];
  let length = 0;
  let ended = false;
  while (!ended && length < n) {
    const r = await it.next();
    if (r.done) ended = true;
    else {
      first.push(Buffer.from(r.value));
      length += r.value.length;
    }
  }
  const head = Buffer.concat(first);
  const all = (async function* (): AsyncGenerator<Buffer> {
    if (head.length) yield head;
    if (ended) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  })();
  const stream = Readable.from(all, { objectMode: false });
  stream.on('close', () => input.destroy());
  return { head: head.subarray(0, n), stream };
}
