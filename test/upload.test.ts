// The worker's multipart parse (parseUpload): busboy over a whole request body held in shared memory,
// finding the image in place. It must answer exactly as busboy fed chunk by chunk into a separate
// destination (MultipartReceiver, how optmark parsed on the event loop before), for well-formed and
// broken forms alike, and must never hand back bytes that are not the image part's.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OptmarkError } from '../src/errors.js';
import { MultipartReceiver, parseUpload, safeBasename, splitFirstPart, type ReceivedImage } from '../src/pipeline/upload.js';
import { credentialsPolicy } from '../src/pipeline/credentials.js';
import { warmUpProtect } from '../src/transfer/warmup.js';
import { multipart, type Part } from './helpers/server.js';

const LIMIT = 1 << 20;

/** `body` copied into a region in the middle of a shared buffer, as the arena holds it. */
function inArena(body: Uint8Array): { region: Uint8Array; sab: Uint8Array } {
  const sab = new Uint8Array(new SharedArrayBuffer(body.length + 8192));
  sab.fill(0xee);
  const region = sab.subarray(4096, 4096 + body.length);
  region.set(body);
  return { region, sab };
}

type Outcome = { code: string } | { bytes: Buffer; filename: string | undefined; mimeType: string };

/** Settles within 2 s or reports a hang: a parse that never ends would hold a worker until its deadline. */
function settled<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the parse never settled')), 2000);
  });
  return Promise.race([p, hang]).finally(() => clearTimeout(timer));
}

async function outcome(p: Promise<ReceivedImage>): Promise<Outcome> {
  try {
    const r = await settled(p);
    return { bytes: Buffer.from(r.bytes), filename: r.filename, mimeType: r.mimeType };
  } catch (err) {
    if (err instanceof OptmarkError) return { code: err.code };
    throw err;
  }
}

/** The streaming way: chunks of the given sizes, each a standalone ArrayBuffer, into a separate destination. */
function streamed(body: Buffer, contentType: string, sizes: number[]): Promise<Outcome> {
  const rx = new MultipartReceiver({ contentType, destination: new Uint8Array(new SharedArrayBuffer(LIMIT)), maxImageBytes: LIMIT });
  return outcome(
    (async () => {
      let at = 0;
      let i = 0;
      do {
        const n = Math.min(sizes[i++ % sizes.length]!, body.length - at);
        const chunk = body.buffer.slice(body.byteOffset + at, body.byteOffset + at + n) as ArrayBuffer;
        at += n;
        try {
          rx.push(chunk, at >= body.length);
        } catch {
          break; // the error is what `done` rejects with
        }
      } while (at < body.length);
      return rx.done;
    })(),
  );
}

describe('parseUpload', () => {
  it('finds the image where it lies, as a view of the same memory, and leaves the body as it was', async () => {
    const image = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31 + 7) & 0xff));
    const form = multipart([{ name: 'image', filename: 'dir/a photo.jpg', type: 'image/jpeg', data: image }], 'XyZ');
    const { region, sab } = inArena(form.body);
    const before = Buffer.from(sab);
    const got = await parseUpload(region, form.contentType, LIMIT);
    expect(got.bytes.buffer).toBe(sab.buffer);
    expect(got.bytes.byteOffset - region.byteOffset).toBe(form.body.indexOf(image));
    expect(Buffer.from(got.bytes).equals(image)).toBe(true);
    expect(got.filename).toBe('a photo.jpg'); // busboy keeps the base name only
    expect(got.mimeType).toBe('image/jpeg');
    expect(Buffer.from(sab).equals(before)).toBe(true);
  });

  it('leaves nothing waiting on the event loop once it has settled, however it settled', async () => {
    // Regression: the end-of-form check (a setImmediate) outlived the parse. In an image worker the
    // event loop does not turn between synchronous tasks (piscina waits in Atomics.wait), so every
    // protect left one behind holding its receiver and parser: 42,000 of them, about 100 MB of one
    // worker's heap, after 240,000 protects.
    const immediates = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;
    const image = Buffer.alloc(5000, 7);
    const b = 'bnd';
    const ct = `multipart/form-data; boundary=${b}`;
    const cases: Array<[string, Buffer, number, string | number]> = [
      ['the short cut', multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], b).body, LIMIT, 5000],
      [
        'the whole-body parse',
        multipart(
          [
            { name: 'note', data: 'x' },
            { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image },
          ],
          b,
        ).body,
        LIMIT,
        'unexpected_part',
      ],
      ['a refusal', multipart([{ name: 'image', filename: 'a.txt', type: 'text/plain', data: 'x' }], b).body, LIMIT, 'unsupported_media_type'],
      ['an image over the limit', multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], b).body, 4999, 'payload_too_large'],
    ];
    for (const [what, body, limit, expected] of cases) {
      const before = immediates();
      const got = await outcome(parseUpload(inArena(body).region, ct, limit));
      expect('bytes' in got ? got.bytes.length : got.code, what).toBe(expected);
      expect(immediates(), what).toBe(before);
    }
  });

  it('refuses an image part over the limit with 413, and accepts one of exactly the limit', async () => {
    const form = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: Buffer.alloc(1000, 1) }]);
    expect(await outcome(parseUpload(inArena(form.body).region, form.contentType, 999))).toEqual({ code: 'payload_too_large' });
    const ok = await outcome(parseUpload(inArena(form.body).region, form.contentType, 1000));
    expect('bytes' in ok && ok.bytes.length).toBe(1000);
  });

  it('answers the broken and unexpected forms with the same codes as the streaming receiver', async () => {
    const b = 'bnd';
    const forms: Array<[Buffer, string]> = [
      [Buffer.from(`--${b}--\r\n`), 'missing_image'],
      [multipart([{ name: 'image', data: 'text' }], b).body, 'missing_image'],
      [multipart([{ name: 'note', data: 'x' }], b).body, 'unexpected_part'],
      [multipart([{ name: 'other', filename: 'a.jpg', type: 'image/jpeg', data: 'x' }], b).body, 'unexpected_part'],
      [multipart([{ name: 'image', filename: 'a.txt', type: 'text/plain', data: 'x' }], b).body, 'unsupported_media_type'],
      [multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: '' }], b).body, 'unsupported_format'],
      [
        multipart(
          [
            { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: 'x' },
            { name: 'image', filename: 'b.jpg', type: 'image/jpeg', data: 'y' },
          ],
          b,
        ).body,
        'too_many_parts',
      ],
      [
        Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\nunterminated`),
        'malformed_multipart',
      ],
      [Buffer.from('no boundary anywhere'), 'malformed_multipart'],
      // Regression (found by the property below): busboy never settled on this form, leaving the
      // request held until the client gave up (on the event loop) or the task deadline (in a worker).
      [multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: `--${b}\r\n--${b.slice(0, -1)}` }], b).body, 'malformed_multipart'],
    ];
    for (const [body, code] of forms) {
      const ct = `multipart/form-data; boundary=${b}`;
      expect(await outcome(parseUpload(inArena(body).region, ct, LIMIT)), body.toString('latin1')).toEqual({ code });
      expect(await streamed(body, ct, [7, 300]), body.toString('latin1')).toEqual({ code });
    }
  });

  it('agrees with the receiver that copies, and, on forms whose data never holds the boundary, with any chunking (property)', async () => {
    const boundary = fc.stringMatching(/^[0-9A-Za-z'+_.-]{1,40}$/);
    // Bytes that look like the framing, so that near-misses of the delimiter land inside part data.
    const data = (b: string) =>
      fc
        .array(
          fc.oneof(
            fc.uint8Array({ maxLength: 300 }),
            fc.constantFrom(Buffer.from('\r\n'), Buffer.from(`\r\n--${b}`.slice(0, -1)), Buffer.from(`--${b}`), Buffer.from('\r\n-')),
          ),
          { maxLength: 12 },
        )
        .map((xs) => Buffer.concat(xs));
    const part = (b: string): fc.Arbitrary<Part> =>
      fc.record({
        name: fc.constantFrom('image', 'image', 'note', 'img'),
        filename: fc.option(fc.constantFrom('a.jpg', 'ü.png', 'x/y.webp', ''), { nil: undefined }),
        type: fc.option(fc.constantFrom('image/jpeg', 'application/octet-stream', 'text/plain', 'IMAGE/PNG'), { nil: undefined }),
        data: data(b),
      });
    const form = boundary.chain((b) =>
      fc.record({
        b: fc.constant(b),
        parts: fc.array(part(b), { minLength: 0, maxLength: 3 }),
        truncate: fc.option(fc.nat(), { nil: undefined }),
        // A part busboy skips (no Content-Disposition) before the others: the short cut's marker lands there.
        skipped: fc.boolean(),
        sizes: fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 5 }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(form, async ({ b, parts, truncate, skipped, sizes }) => {
        let { body, contentType } = multipart(parts, b);
        if (skipped) body = Buffer.concat([Buffer.from(`--${b}\r\nX-Note: no disposition\r\n\r\nskipped data\r\n`), body]);
        if (truncate !== undefined) body = body.subarray(0, truncate % (body.length + 1));
        if (body.length === 0) return; // an empty body never reaches the worker (the event loop refuses it)
        // Every way settles (settled() fails the case on a hang) ...
        const inPlace = await outcome(parseUpload(inArena(body).region, contentType, LIMIT));
        const whole = await streamed(body, contentType, [body.length]);
        const chunked = await streamed(body, contentType, sizes);
        // ... finding the image in place gives what copying it out gives ...
        expect(inPlace).toEqual(whole);
        // ... and a form as RFC 7578 allows it (the boundary never inside part data) parses the same
        // however it is cut. busboy itself is not chunking-independent on forms that break that rule:
        // the worker always parses the whole body in one write, so its answer no longer depends on how
        // TCP happened to cut the upload.
        if (parts.every((p) => !Buffer.from(p.data).includes(`--${b}`))) expect(inPlace).toEqual(chunked);
      }),
      { numRuns: 1000 },
    );
  });

  it('keeps the image whole when it is handed the body as views of itself in pieces (the compaction path)', async () => {
    const image = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7) & 0xff));
    const form = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], 'q');
    for (const step of [1, 13, 100, 997]) {
      const { region } = inArena(form.body);
      const rx = new MultipartReceiver({ contentType: form.contentType, destination: region, maxImageBytes: LIMIT });
      for (let at = 0; at < region.length; at += step) rx.push(region.subarray(at, Math.min(region.length, at + step)), at + step >= region.length);
      const got = await rx.done;
      expect(Buffer.from(got.bytes).equals(image), `pieces of ${step}`).toBe(true);
    }
  });
});

describe("splitFirstPart (the short cut past busboy's scan of the image)", () => {
  const image = Buffer.from('\xff\xd8 image bytes \r\n-- not a delimiter \xff\xd9', 'latin1');
  it("finds the first part's data in the form clients send, and hands busboy the form with a marker in its place", () => {
    for (const boundary of ['----WebKitFormBoundary7MA4YWxkTrZu0gW', 'x', '----accept0123', 'a.b+c']) {
      const form = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], boundary);
      const split = splitFirstPart(form.body, form.contentType)!;
      expect(split, boundary).toBeDefined();
      expect(Buffer.from(split.data).equals(image)).toBe(true);
      expect(split.data.buffer).toBe(form.body.buffer); // a view, not a copy
      expect(split.form.toString('latin1')).toBe(form.body.toString('latin1').replace(image.toString('latin1'), 'X'));
    }
    // A quoted boundary, read as busboy reads it.
    const quoted = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], 'q r');
    expect(splitFirstPart(quoted.body, 'multipart/form-data; boundary="q r"')).toBeDefined();
  });

  it('declines (so busboy parses the whole body) whenever the short cut could read the form differently', () => {
    const b = 'bnd';
    const ct = `multipart/form-data; boundary=${b}`;
    const plain = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], b).body;
    const cases: Array<[string, Buffer, string]> = [
      ['a preamble', Buffer.concat([Buffer.from('preamble\r\n'), plain]), ct],
      ['transport padding after the boundary', Buffer.from(plain.toString('latin1').replace(`--${b}\r\n`, `--${b} \r\n`), 'latin1'), ct],
      ['data that opens with the delimiter', multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: `--${b}\r\nx` }], b).body, ct],
      ['no delimiter after the data', plain.subarray(0, plain.length - 12), ct],
      ['no end of the header block', Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image"`), ct],
      ['a header block over 16 KiB', multipart([{ name: 'image', filename: 'a'.repeat(17_000), type: 'image/jpeg', data: image }], b).body, ct],
      ['no boundary parameter', plain, 'multipart/form-data'],
      ['another boundary', plain, 'multipart/form-data; boundary=other'],
    ];
    for (const [what, body, type] of cases) expect(splitFirstPart(body, type), what).toBeUndefined();
  });

  it('gives the same answer as the whole-body parse when the first part is not the image', async () => {
    const b = 'bnd';
    const ct = `multipart/form-data; boundary=${b}`;
    const forms = [
      multipart(
        [
          { name: 'note', data: 'x' },
          { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image },
        ],
        b,
      ).body,
      Buffer.concat([
        Buffer.from(`--${b}\r\nX-No-Disposition: 1\r\n\r\nskipped\r\n`),
        multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image }], b).body,
      ]),
      multipart(
        [
          { name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: image },
          { name: 'image', filename: 'b.jpg', type: 'image/jpeg', data: image },
        ],
        b,
      ).body,
    ];
    for (const body of forms) {
      expect(splitFirstPart(body, ct)).toBeDefined();
      expect(await outcome(parseUpload(inArena(body).region, ct, LIMIT))).toEqual(await streamed(body, ct, [body.length]));
    }
  });
});

describe('parseUpload on the forms most clients send', () => {
  const image = Buffer.from('\xff\xd8 image bytes \r\n-- not a delimiter \xff\xd9', 'latin1');
  const b = '----WebKitFormBoundary7MA4YWxkTrZu0gW';
  const ct = `multipart/form-data; boundary=${b}`;
  const form = (head: string, data: Buffer | string = image, tail = `\r\n--${b}--\r\n`) =>
    Buffer.concat([Buffer.from(`--${b}\r\n${head}\r\n\r\n`, 'latin1'), Buffer.from(data), Buffer.from(tail, 'latin1')]);
  const plain = 'Content-Disposition: form-data; name="image"; filename="photo.jpg"\r\nContent-Type: image/jpeg';

  it('reads the forms of curl, browsers and HTTP libraries, as a view of the body, as busboy reads them', async () => {
    const forms = [
      form(plain),
      form('content-disposition: form-data; name="image"; filename="a b (1).JPG"\r\ncontent-type: IMAGE/Png'),
      form('Content-Type: image/webp\r\nContent-Disposition: form-data; name="image"; filename="x.webp"'),
      form('Content-Disposition: form-data; name="image"; filename="a.bin"\r\nContent-Type: application/octet-stream'),
      form(plain, image, `\r\n--${b}--`),
    ];
    for (const body of forms) {
      const { region } = inArena(body);
      const got = await parseUpload(region, ct, LIMIT);
      expect(got.bytes.buffer).toBe(region.buffer); // a view, not a copy
      expect({ bytes: Buffer.from(got.bytes), filename: got.filename, mimeType: got.mimeType }).toEqual(await streamed(body, ct, [body.length]));
    }
  });
});

describe('warmUpProtect (a worker compiles the protect path before its first request)', () => {
  it('runs the plain form through parseUpload and runProtect in shared memory, and checks the answer', async () => {
    const policy = credentialsPolicy('update', { dataDir: '/nonexistent-warm-up' });
    await expect(warmUpProtect(policy, LIMIT, 6)).resolves.toBeUndefined();
    // A limit the samples do not fit in fails loudly, never silently.
    await expect(warmUpProtect(policy, 16, 3)).rejects.toBeInstanceOf(OptmarkError);
  });
});

describe('safeBasename', () => {
  it.each([
    ['photo.jpg', 'photo'],
    ['dir/sub/photo.final.png', 'photo.final'],
    ['C:\\Users\\a\\b.webp', 'b'],
    ['...', 'image'],
    [undefined, 'image'],
    ['a"b*c:d<e>f?g|h.jpg', 'abcdefgh'],
  ])('%s -> %s', (name, want) => {
    expect(safeBasename(name)).toBe(want);
  });
});

describe('formBoundary and checkContentType (the Content-Type read without busboy)', () => {
  it('reads the boundary of plainly written headers as busboy does, and leaves the rest to busboy', async () => {
    const { formBoundary, checkContentType } = await import('../src/pipeline/form-type.js');
    expect(formBoundary('multipart/form-data; boundary=abc')).toBe('abc');
    expect(formBoundary('multipart/form-data;boundary="a b:c"')).toBe('a b:c');
    expect(formBoundary('multipart/form-data; charset=utf-8; BOUNDARY=x; boundary=y')).toBe('x');
    expect(formBoundary('multipart/form-data \t; boundary=x \t')).toBe('x');
    expect(formBoundary('multipart/form-data')).toBeNull();
    expect(formBoundary('multipart/form-data; charset=utf-8')).toBeNull();
    // Escapes, stray characters or a missing value: not plainly written, so no short cut and no early refusal.
    for (const t of [
      'multipart/form-data; boundary="a\\"b"',
      'multipart/form-data; boundary=',
      'multipart/form-data; boundary=x; junk',
      ' multipart/form-data; boundary=x',
    ]) {
      expect(formBoundary(t), t).toBeUndefined();
      expect(() => checkContentType(t), t).not.toThrow();
    }
    expect(() => checkContentType('multipart/form-data')).toThrow(expect.objectContaining({ code: 'malformed_multipart' }));
    expect(() => checkContentType('image/jpeg')).toThrow(expect.objectContaining({ code: 'unsupported_media_type' }));
    // Whatever busboy reads from an escaped boundary, a form using it still parses (the plain way).
    const form = multipart([{ name: 'image', filename: 'a.jpg', type: 'image/jpeg', data: Buffer.from('\xff\xd8 data \xff\xd9', 'latin1') }], 'a"b');
    const got = await parseUpload(inArena(form.body).region, 'multipart/form-data; boundary="a\\"b"', LIMIT);
    expect(Buffer.from(got.bytes).toString('latin1')).toBe('\xff\xd8 data \xff\xd9');
  });
});
