/**
 * Verify when the fingerprint detector cannot look (issue 37, point 5): pixels that do not decode in a
 * sound container, or a detector past its time limit, are reported not examined (present false,
 * confidence 0, blocks 0) with a warning that says why, never as "not found". The real server (uWS,
 * worker pool, sharp) answers; an unreadable secret is 503 fingerprint_unavailable (test/http-api.test.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFingerprint, embedFingerprint } from '../src/fingerprint/index.js';
import { texturedImage } from './helpers/fingerprint.js';
import { TestServer, api } from './helpers/server.js';

const SECRET = new Uint8Array(32).fill(5);
const MAX_PIXELS = 40_000_000;
const NOT_EXAMINED = { present: false, confidence: 0, blocks: 0 };

/**
 * A JPEG whose container reads (every marker, the frame header) but whose pixels do not decode: its
 * Huffman table's code counts are bogus, which libjpeg refuses (a fatal error, not a warning).
 */
async function pixelsThatDoNotDecode(): Promise<Buffer> {
  const jpg = Buffer.from(
    await sharp({ create: { width: 300, height: 200, channels: 3, background: '#336699' } })
      .jpeg()
      .toBuffer(),
  );
  const dht = jpg.indexOf(Buffer.from([0xff, 0xc4]));
  jpg.fill(0xff, dht + 5, dht + 21);
  return jpg;
}

describe('the detector in-process', () => {
  it('pixels that do not decode: not examined, with fingerprint_undecodable', async () => {
    const r = await detectFingerprint(await pixelsThatDoNotDecode(), SECRET, { maxPixels: MAX_PIXELS });
    expect(r).toMatchObject({ ...NOT_EXAMINED, scheme: 0 });
    expect(r.warning?.code).toBe('fingerprint_undecodable');
  });

  it('a marked picture past a tiny time limit: not examined, with fingerprint_timeout; found without it', async () => {
    const marked = Buffer.from(await embedFingerprint(await texturedImage(1600, 1200, 3), SECRET, { maxPixels: MAX_PIXELS }));
    expect(await detectFingerprint(marked, SECRET, { maxPixels: MAX_PIXELS })).toMatchObject({ present: true, blocks: 256 });
    const r = await detectFingerprint(marked, SECRET, { maxPixels: MAX_PIXELS, timeoutMs: 1 });
    expect(r).toMatchObject({ ...NOT_EXAMINED, scheme: 0 });
    expect(r.warning?.code).toBe('fingerprint_timeout');
  }, 60_000);
});

describe('verify through the server', () => {
  let dataDir: string;
  let slow: TestServer;
  let key: string;
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'optmark-unexamined-'));
    writeFileSync(join(dataDir, 'fingerprint.key'), SECRET, { mode: 0o600 });
    slow = await TestServer.start({ dataDir, env: { OPTMARK_POOL_SIZE: '1', OPTMARK_FINGERPRINT_TIMEOUT_MS: '1' } });
    ({ key } = await slow.account());
  }, 60_000);
  afterAll(async () => {
    await slow?.dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a marked file past the configured time limit is 200, not examined, with the warning fingerprint_timeout', async () => {
    const marked = Buffer.from(await embedFingerprint(await texturedImage(1600, 1200, 4), SECRET, { maxPixels: MAX_PIXELS }));
    const a = await api(slow, 'verify', key, marked);
    expect(a.status, a.body.toString().slice(0, 200)).toBe(200);
    expect(a.json.fingerprint).toEqual(NOT_EXAMINED);
    expect(a.json.warnings.map((w: { code: string }) => w.code)).toContain('fingerprint_timeout');
  }, 60_000);

  it('a file whose pixels do not decode is 200, not examined, with the warning fingerprint_undecodable', async () => {
    const a = await api(slow, 'verify', key, await pixelsThatDoNotDecode());
    expect(a.status, a.body.toString().slice(0, 200)).toBe(200);
    expect(a.json.fingerprint).toEqual(NOT_EXAMINED);
    expect(a.json.warnings.map((w: { code: string }) => w.code)).toContain('fingerprint_undecodable');
  }, 60_000);
});
