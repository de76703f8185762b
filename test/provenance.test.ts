/**
 * Provenance layer: the key store (creation, modes, rotation, configured key file, reload on a miss),
 * the tag on JPEG/PNG/WebP made with sharp, tampering with ExifTool (exiftool-vendored) the way the
 * acceptance check does, garbage tags, and the worker's live layers. Keyed by format and by case.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { ExifTool } from 'exiftool-vendored';
import sharp from 'sharp';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { assemble } from '../src/formats/bytes.js';
import { FORMATS, requireFormat, type FormatName } from '../src/formats/index.js';
import { read } from '../src/marking/engine.js';
import { LiveLayers } from '../src/pipeline/layers-live.js';
import { runProtect } from '../src/pipeline/protect.js';
import {
  Keyring,
  NS_PROVENANCE,
  SigningKeySource,
  listSigningKeys,
  loadSigningKey,
  protectSigned,
  rotateSigningKey,
  signedMessage,
  verifyProvenance,
  type ProvenanceReport,
  type SigningKey,
} from '../src/provenance/index.js';
import type { Document } from '../src/xmp/index.js';
import { encodeForContainer, mergedDocument, openPayload } from '../src/xmp/index.js';
import { NS_RDF } from '../src/xmp/namespaces.js';
import { findProperties, setSimpleProperty } from '../src/xmp/properties.js';

const FORMAT_NAMES: FormatName[] = ['jpeg', 'png', 'webp'];
const ALL_VALID = { present: true, valid: true, verifiable: true };

/** The image /api/v1/protect would send back for `input` (the worker's protect pipeline, body decoded). */
async function apiProtect(input: Uint8Array): Promise<Buffer> {
  const { body } = await runProtect(input, 'a', { mode: 'invalidate', identity: () => Promise.reject(new Error('no C2PA signer in this test')) });
  return Buffer.from((JSON.parse(Buffer.from(body).toString()) as { imageBase64: string }).imageBase64, 'base64');
}
const exiftool = new ExifTool({ taskTimeoutMillis: 60_000 });
const dirs: string[] = [];

function tempDir(prefix = 'optmark-prov-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A photo-like image (noise) with EXIF, so "other metadata" exists outside the XMP. */
async function image(format: FormatName, seed = 1, size = 256): Promise<Buffer> {
  const s = sharp({ create: { width: size, height: (size * 3) / 4, channels: 3, noise: { type: 'gaussian', mean: 100 + seed, sigma: 30 } } }).withExif({
    IFD0: { Copyright: 'optmark test' },
  });
  return format === 'jpeg' ? s.jpeg().toBuffer() : format === 'png' ? s.png().toBuffer() : s.webp().toBuffer();
}

/** Runs ExifTool on a copy of the bytes with raw arguments (as the acceptance check does) and returns the result. */
async function exiftoolEdit(bytes: Uint8Array, ext: string, ...args: string[]): Promise<Buffer> {
  const path = join(tempDir(), `edit.${ext}`);
  writeFileSync(path, bytes);
  await exiftool.write(path, {}, { writeArgs: args });
  return readFileSync(path);
}

/** Rewrites the file's XMP with an edit of the merged document (for hand-made garbage tags). */
function editXmp(bytes: Uint8Array, edit: (doc: Document) => void): Buffer {
  const format = requireFormat(bytes);
  const doc = mergedDocument(openPayload(format.readXmp(bytes)));
  edit(doc);
  return assemble(format.writeXmp(bytes, encodeForContainer(doc, format.maxMainPacketBytes)));
}

function tagProperty(doc: Document, local: string) {
  return findProperties(doc, (ns, l) => ns === NS_PROVENANCE && l === local)[0]!.element!;
}

function setTag(doc: Document, local: string, value: string): void {
  setSimpleProperty(doc, NS_PROVENANCE, 'optmark', local, value);
}

/** One PNG chunk: length, type, data, CRC. */
function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

const status = (r: ProvenanceReport) => ({ present: r.present, valid: r.valid, verifiable: r.verifiable });

let dataDir = '';
let key: SigningKey;
let ring: Keyring;
const inputs = new Map<FormatName, Buffer>();
const signed = new Map<FormatName, Buffer>();

beforeAll(async () => {
  dataDir = tempDir();
  key = await loadSigningKey({ dataDir });
  ring = await Keyring.open({ dataDir });
  for (const f of FORMAT_NAMES) {
    inputs.set(f, await image(f));
    signed.set(f, Buffer.from((await protectSigned(inputs.get(f)!, key)).bytes));
  }
});

afterAll(async () => {
  await exiftool.end();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

afterEach(() => vi.restoreAllMocks());

describe('signing keys', () => {
  it('are created on first use: signing/ 0700, current.pem 0600, the public key filed under its key id', async () => {
    const dir = tempDir();
    const k = await loadSigningKey({ dataDir: dir });
    expect(k.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(statSync(join(dir, 'signing')).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'signing', 'current.pem')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'signing', 'current.pem'), 'utf8')).toContain('BEGIN PRIVATE KEY');
    expect(readdirSync(join(dir, 'signing', 'public'))).toEqual([`${k.keyId}.pem`]);
    expect(readFileSync(join(dir, 'signing', 'public', `${k.keyId}.pem`), 'utf8')).toContain('BEGIN PUBLIC KEY');
    expect((await loadSigningKey({ dataDir: dir })).keyId).toBe(k.keyId);
  });

  it('first use racing in several workers settles on one key', async () => {
    const dir = tempDir();
    const keys = await Promise.all(Array.from({ length: 6 }, () => loadSigningKey({ dataDir: dir })));
    expect(new Set(keys.map((k) => k.keyId)).size).toBe(1);
    expect(readdirSync(join(dir, 'signing', 'public'))).toEqual([`${keys[0]!.keyId}.pem`]);
    expect(readdirSync(join(dir, 'signing')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('rotation makes a new current key and keeps every old public key', async () => {
    const dir = tempDir();
    const first = await loadSigningKey({ dataDir: dir });
    const r1 = await rotateSigningKey({ dataDir: dir });
    const r2 = await rotateSigningKey({ dataDir: dir });
    expect(r1.previousKeyId).toBe(first.keyId);
    expect(r2.previousKeyId).toBe(r1.keyId);
    expect((await loadSigningKey({ dataDir: dir })).keyId).toBe(r2.keyId);
    expect(statSync(join(dir, 'signing', 'current.pem')).mode & 0o777).toBe(0o600);
    const listing = await listSigningKeys({ dataDir: dir });
    expect(listing.keys.map((k) => k.keyId).sort()).toEqual([first.keyId, r1.keyId, r2.keyId].sort());
    expect(listing.keys.filter((k) => k.current).map((k) => k.keyId)).toEqual([r2.keyId]);
  });

  it('OPTMARK_SIGNING_KEY_FILE signs instead, its public key is recorded, and rotate refuses to replace it', async () => {
    const dir = tempDir();
    const file = join(dir, 'external.pem');
    writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const k = await loadSigningKey({ dataDir: dir, file });
    expect(existsSync(join(dir, 'signing', 'current.pem'))).toBe(false);
    expect(readdirSync(join(dir, 'signing', 'public'))).toEqual([`${k.keyId}.pem`]);
    await expect(rotateSigningKey({ dataDir: dir, file })).rejects.toMatchObject({ code: 'signing_key_external' });
    // The configured key verifies even where nothing was recorded yet (another data directory).
    const elsewhere = await Keyring.open({ dataDir: tempDir(), file });
    expect(await elsewhere.find(k.keyId)).toBeDefined();
  });

  const INVALID_KEY_FILES: Array<[string, (path: string) => void, string]> = [
    ['missing', () => undefined, 'signing_key_missing'],
    ['not PEM', (p) => writeFileSync(p, 'not a key'), 'signing_key_invalid'],
    [
      'an RSA key',
      (p) => writeFileSync(p, generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' })),
      'signing_key_invalid',
    ],
    ['a public key', (p) => writeFileSync(p, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' })), 'signing_key_invalid'],
    ['too large', (p) => writeFileSync(p, Buffer.alloc(100_000, 0x41)), 'signing_key_invalid'],
  ];
  it.each(INVALID_KEY_FILES)('a key file that is %s is refused with a stable code and no key material', async (_, make, code) => {
    const file = join(tempDir(), 'key.pem');
    make(file);
    const err = await loadSigningKey({ dataDir: tempDir(), file }).then(
      () => undefined,
      (e: unknown) => e as Error & { code: string },
    );
    expect(err?.code).toBe(code);
    expect(err?.message).not.toMatch(/BEGIN|MII/);
  });

  it('the keyring finds a key added after it loaded: at once when public/ changed, else after the interval', async () => {
    const dir = tempDir();
    await loadSigningKey({ dataDir: dir });
    const publicDir = join(dir, 'signing', 'public');
    // Whole seconds, so the stamp can be put back exactly (a file system with coarse mtimes).
    utimesSync(publicDir, 1_000_000, 1_000_000);
    const fast = await Keyring.open({ dataDir: dir }, 0);
    const slow = await Keyring.open({ dataDir: dir }, 60_000);
    const { keyId } = await rotateSigningKey({ dataDir: dir });
    expect(await slow.find(keyId)).toBeDefined(); // public/ changed: reread at once
    utimesSync(publicDir, 1_000_000, 1_000_000);
    const again = await Keyring.open({ dataDir: dir }, 60_000);
    const { keyId: unseen } = await rotateSigningKey({ dataDir: dir });
    utimesSync(publicDir, 1_000_000, 1_000_000);
    expect(await again.find(unseen)).toBeUndefined(); // no visible change and within the interval: no reread
    expect(await fast.find(unseen)).toBeDefined(); // interval passed: reread
    expect(await fast.find('0123456789abcdef')).toBeUndefined();
    expect(await fast.find('../../etc/passwd')).toBeUndefined();
  });

  it('an empty or unreadable store is an empty keyring, not an error', async () => {
    expect((await Keyring.open({ dataDir: join(tempDir(), 'nothing-here') })).size).toBe(0);
    const dir = tempDir();
    await loadSigningKey({ dataDir: dir });
    writeFileSync(join(dir, 'signing', 'public', 'junk.pem'), 'junk');
    expect((await Keyring.open({ dataDir: dir })).size).toBe(1);
    expect((await listSigningKeys({ dataDir: dir })).unreadable).toEqual(['junk.pem']);
  });

  it('a long-running signer picks up a rotation', async () => {
    const dir = tempDir();
    const source = new SigningKeySource({ dataDir: dir });
    const before = await source.get();
    expect((await source.get()).keyId).toBe(before.keyId);
    const { keyId } = await rotateSigningKey({ dataDir: dir });
    expect((await source.get()).keyId).toBe(keyId);
  });
});

describe.each(FORMAT_NAMES)('provenance tag in %s', (f) => {
  const ext = FORMATS.get(f)!.extension;

  it('an untouched file verifies, and ExifTool reads the tag and the opt-out without complaint', async () => {
    const r = await verifyProvenance(signed.get(f)!, ring);
    expect(r).toMatchObject({ ...ALL_VALID, reason: 'valid', keyId: key.keyId });
    expect(read(signed.get(f)!).optedOut).toBe(true);
    const path = join(tempDir(), `signed.${ext}`);
    writeFileSync(path, signed.get(f)!);
    const tags = (await exiftool.readRaw(path, { readArgs: ['-G1', '-a', '-n'] })) as Record<string, unknown>;
    expect(tags['XMP-optmark:KeyId']).toBe(key.keyId);
    expect(tags['XMP-plus:DataMining']).toBe('DMI-PROHIBITED-AIMLTRAINING'); // -n prints ExifTool's token
    expect(tags['ExifTool:Warning']).toBeUndefined();
    expect(tags['ExifTool:Error']).toBeUndefined();
  });

  it('survives ExifTool rewriting the XMP packet for another XMP property (the tag is kept verbatim)', async () => {
    const edited = await exiftoolEdit(signed.get(f)!, ext, '-XMP-dc:Title=Edited by ExifTool');
    expect(edited.equals(signed.get(f)!)).toBe(false);
    expect(status(await verifyProvenance(edited, ring))).toEqual(ALL_VALID);
  });

  it('other metadata changed (ExifTool -EXIF:Artist): present, not valid', async () => {
    const edited = await exiftoolEdit(signed.get(f)!, ext, '-EXIF:Artist=Someone Else');
    expect(await verifyProvenance(edited, ring)).toMatchObject({ present: true, valid: false, verifiable: true, reason: 'digest_mismatch' });
  });

  it('pixels changed (the same XMP packet on other pixels): present, not valid', async () => {
    const format = FORMATS.get(f)!;
    const packet = format.readXmp(signed.get(f)!).packets[0]!;
    const other = await image(f, 7);
    const transplanted = assemble(format.writeXmp(other, { main: packet }));
    expect(await verifyProvenance(transplanted, ring)).toMatchObject({ present: true, valid: false, verifiable: true, reason: 'digest_mismatch' });
  });

  it('opt-out flipped to allowed (ExifTool -XMP-plus:DataMining#=DMI-ALLOWED): not valid, not opted out', async () => {
    const edited = await exiftoolEdit(signed.get(f)!, ext, '-XMP-plus:DataMining#=DMI-ALLOWED');
    expect(read(edited).optedOut).toBe(false);
    expect(await verifyProvenance(edited, ring)).toMatchObject({ present: true, valid: false, reason: 'value_mismatch' });
  });

  it('opt-out removed (ExifTool -XMP-plus:DataMining=): not valid', async () => {
    const edited = await exiftoolEdit(signed.get(f)!, ext, '-XMP-plus:DataMining=');
    expect(read(edited).optedOut).toBe(false);
    expect(await verifyProvenance(edited, ring)).toMatchObject({ present: true, valid: false, reason: 'value_mismatch' });
  });

  it('opt-out changed to another prohibiting value: not valid (the tag vouches for one exact value)', async () => {
    const edited = await exiftoolEdit(signed.get(f)!, ext, '-XMP-plus:DataMining#=DMI-PROHIBITED');
    expect(await verifyProvenance(edited, ring)).toMatchObject({ present: true, valid: false, reason: 'value_mismatch' });
  });
});

describe('verification', () => {
  it('a tag signed by a key this server does not have: present, not verifiable, not valid', async () => {
    const foreign = await Keyring.open({ dataDir: tempDir() });
    for (const f of FORMAT_NAMES) {
      expect(await verifyProvenance(signed.get(f)!, foreign)).toMatchObject({ present: true, valid: false, verifiable: false, reason: 'unknown_key' });
    }
  });

  it('after rotation the old signature stays valid, and the new key signs valid tags too', async () => {
    const dir = tempDir();
    const old = await loadSigningKey({ dataDir: dir });
    const server = await Keyring.open({ dataDir: dir }, 0);
    const before = (await protectSigned(inputs.get('png')!, old)).bytes;
    await rotateSigningKey({ dataDir: dir });
    const fresh = await loadSigningKey({ dataDir: dir });
    expect(fresh.keyId).not.toBe(old.keyId);
    const after = (await protectSigned(inputs.get('png')!, fresh)).bytes;
    expect(status(await verifyProvenance(before, server))).toEqual(ALL_VALID);
    expect(await verifyProvenance(after, server)).toMatchObject({ ...ALL_VALID, keyId: fresh.keyId });
  });

  it('a file without a tag: nothing present, one XMP read and no hashing of the content', async () => {
    // The hashing reads the content from the file's structure (one walk per file), so the spy sits on
    // the structure's contentOutsideXmp, which the registry's shortcut of that name also calls.
    const jpeg = FORMATS.get('jpeg')!;
    const spy = vi.spyOn(Object.getPrototypeOf(jpeg.parse(inputs.get('jpeg')!)), 'contentOutsideXmp');
    expect(await verifyProvenance(inputs.get('jpeg')!, ring)).toMatchObject({ present: false, valid: false, verifiable: false, reason: 'absent' });
    const protectedOnly = await apiProtect(inputs.get('jpeg')!);
    expect(await verifyProvenance(protectedOnly, ring)).toMatchObject({ present: false, reason: 'absent' });
    expect(spy).not.toHaveBeenCalled();
    // The spy does see the hashing when there is a tag to check (so the assertions above mean something).
    expect((await verifyProvenance(signed.get('jpeg')!, ring)).valid).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it('the API protect path never writes a tag', async () => {
    for (const f of FORMAT_NAMES) {
      const out = await apiProtect(inputs.get(f)!);
      expect(out.includes(Buffer.from(NS_PROVENANCE))).toBe(false);
      // Protecting a signed file through the API keeps the tag as it is (protect edits the opt-out only).
      const again = await apiProtect(signed.get(f)!);
      expect(status(await verifyProvenance(again, ring))).toEqual(ALL_VALID);
    }
  });

  it('marking a signed file again replaces its tag: one tag, valid, newer time', async () => {
    const again = Buffer.from((await protectSigned(signed.get('webp')!, key, { now: new Date(Date.UTC(2030, 0, 1)) })).bytes);
    const doc = mergedDocument(openPayload(requireFormat(again).readXmp(again)));
    expect(findProperties(doc, (ns) => ns === NS_PROVENANCE)).toHaveLength(5);
    expect(tagProperty(doc, 'SignedAt').textContent).toBe('2030-01-01T00:00:00Z');
    expect(status(await verifyProvenance(again, ring))).toEqual(ALL_VALID);
  });

  it('re-signing a tagged PNG that a re-encoder gave a stale copy of its XMP (libvips: zTXt) yields a valid tag', async () => {
    const reencoded = await sharp(signed.get('png')!).keepXmp().png().toBuffer();
    expect(requireFormat(reencoded).readXmp(reencoded).packets.length).toBeGreaterThan(0);
    const again = Buffer.from((await protectSigned(reencoded, key)).bytes);
    // The stale tag is still there in the kept text chunk, and ignored: only the main packet carries the tag.
    expect(requireFormat(again).readXmp(again).packets).toHaveLength(2);
    expect(status(await verifyProvenance(again, ring))).toEqual(ALL_VALID);
  });

  it('another packet that flips the opt-out against the vouched value makes the tag invalid', async () => {
    const allowed = Buffer.from((await protectSigned(inputs.get('png')!, key, { token: 'DMI-ALLOWED' })).bytes);
    expect(status(await verifyProvenance(allowed, ring))).toEqual(ALL_VALID);
    const packet = `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS_RDF}"><rdf:Description xmlns:plus="http://ns.useplus.org/ldf/xmp/1.0/" plus:DataMining="http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED"/></rdf:RDF></x:xmpmeta>`;
    const iend = allowed.length - 12;
    const flipped = Buffer.concat([allowed.subarray(0, iend), pngChunk('tEXt', Buffer.from(`XML:com.adobe.xmp\0${packet}`, 'latin1')), allowed.subarray(iend)]);
    expect(read(flipped).optedOut).toBe(true);
    expect(await verifyProvenance(flipped, ring)).toMatchObject({ present: true, valid: false, reason: 'value_mismatch' });
  });

  it('a JPEG whose XMP needs Extended XMP still carries a valid tag', async () => {
    const big = editXmp(inputs.get('jpeg')!, (doc) => setSimpleProperty(doc, 'http://purl.org/dc/elements/1.1/', 'dc', 'description', 'x'.repeat(90_000)));
    const out = (await protectSigned(big, key)).bytes;
    expect(requireFormat(out).readXmp(out).extended.size).toBe(1);
    expect(status(await verifyProvenance(out, ring))).toEqual(ALL_VALID);
  });

  it('signs a domain-separated text of the fields in a fixed order', () => {
    const text = signedMessage({
      keyId: '0123456789abcdef',
      signedAt: '2026-01-01T00:00:00Z',
      dataMining: 'http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED',
      contentDigest: `sha256:${'0'.repeat(64)}`,
    }).toString();
    expect(text).toBe(
      `optmark provenance tag v1\nKeyId=0123456789abcdef\nSignedAt=2026-01-01T00:00:00Z\nDataMining=http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED\nContentDigest=sha256:${'0'.repeat(64)}`,
    );
  });
});

describe('garbage tags: present, not valid, never thrown, content never hashed', () => {
  const flip = (b64: string): string => {
    const raw = Buffer.from(b64, 'base64');
    raw[10] = raw[10]! ^ 1;
    return raw.toString('base64');
  };
  const GARBAGE: Array<[string, (doc: Document) => void, Partial<ProvenanceReport>]> = [
    ['Signature missing', (d) => tagProperty(d, 'Signature').parentNode!.removeChild(tagProperty(d, 'Signature')), { verifiable: true, reason: 'malformed' }],
    ['Signature not base64', (d) => setTag(d, 'Signature', '!!! not base64 !!!'), { verifiable: true, reason: 'malformed' }],
    ['Signature one bit off', (d) => setTag(d, 'Signature', flip(tagProperty(d, 'Signature').textContent!)), { verifiable: true, reason: 'bad_signature' }],
    ['SignedAt changed', (d) => setTag(d, 'SignedAt', '2001-01-01T00:00:00Z'), { verifiable: true, reason: 'bad_signature' }],
    ['SignedAt not a time', (d) => setTag(d, 'SignedAt', 'yesterday'), { verifiable: true, reason: 'malformed' }],
    ['vouched value changed', (d) => setTag(d, 'DataMining', 'http://ns.useplus.org/ldf/vocab/DMI-ALLOWED'), { verifiable: true, reason: 'bad_signature' }],
    ['vouched value not in the vocabulary', (d) => setTag(d, 'DataMining', 'please do not'), { verifiable: true, reason: 'malformed' }],
    ['ContentDigest changed', (d) => setTag(d, 'ContentDigest', `sha256:${'a'.repeat(64)}`), { verifiable: true, reason: 'bad_signature' }],
    ['KeyId not hex', (d) => setTag(d, 'KeyId', '<script>'), { verifiable: false, reason: 'malformed' }],
    ['KeyId of another key', (d) => setTag(d, 'KeyId', 'ffffffffffffffff'), { verifiable: false, reason: 'unknown_key' }],
    ['huge value', (d) => setTag(d, 'Signature', 'A'.repeat(200_000)), { verifiable: true, reason: 'malformed' }],
    [
      'a field written twice with different values',
      (d) => tagProperty(d, 'KeyId').parentNode!.appendChild(tagProperty(d, 'KeyId').cloneNode(true)).appendChild(d.createTextNode('00')),
      { verifiable: false, reason: 'malformed' },
    ],
    [
      'a field as an rdf:Bag of two',
      (d) => {
        const el = tagProperty(d, 'Signature');
        while (el.firstChild) el.removeChild(el.firstChild);
        const bag = el.appendChild(d.createElementNS(NS_RDF, 'rdf:Bag'));
        for (const v of ['a', 'b']) bag.appendChild(d.createElementNS(NS_RDF, 'rdf:li')).appendChild(d.createTextNode(v));
      },
      { verifiable: true, reason: 'malformed' },
    ],
    [
      'only an unknown property in the namespace',
      (d) => {
        for (const p of findProperties(d, (ns) => ns === NS_PROVENANCE)) p.element!.parentNode!.removeChild(p.element!);
        setTag(d, 'Comment', 'hello');
      },
      { verifiable: false, reason: 'malformed' },
    ],
  ];

  it.each(GARBAGE)('%s', async (_, edit, expected) => {
    for (const f of FORMAT_NAMES) {
      const bytes = editXmp(signed.get(f)!, edit);
      const spy = vi.spyOn(FORMATS.get(f)!, 'contentOutsideXmp');
      const r = await verifyProvenance(bytes, ring);
      expect(r, f).toMatchObject({ present: true, valid: false, ...expected });
      expect(spy, f).not.toHaveBeenCalled();
      spy.mockRestore();
    }
  });

  it('a packet that names the namespace but is not well-formed XML', async () => {
    for (const f of FORMAT_NAMES) {
      const format = FORMATS.get(f)!;
      const broken = assemble(format.writeXmp(inputs.get(f)!, { main: Buffer.from(`<x:xmpmeta xmlns:optmark="${NS_PROVENANCE}"><oops`) }));
      expect(await verifyProvenance(broken, ring), f).toMatchObject({ present: true, valid: false, verifiable: false, reason: 'malformed' });
    }
  });

  it('bytes that are no image at all, or a truncated one', async () => {
    expect(await verifyProvenance(Buffer.from('hello'), ring)).toMatchObject({ present: false, reason: 'absent' });
    const s = signed.get('png')!;
    expect((await verifyProvenance(s.subarray(0, 40), ring)).valid).toBe(false);
  });
});

describe('live layers (what a worker runs)', () => {
  it('fill provenance from the worker init, and detection switched off reports no fingerprint', async () => {
    const layers = new LiveLayers({ dataDir, maxPixels: 1e8, signingKeyFile: undefined, fingerprintSecretFile: undefined, fingerprintDetect: false });
    await layers.warm();
    expect(await layers.verifyProvenance(signed.get('jpeg')!)).toEqual(ALL_VALID);
    expect(await layers.verifyProvenance(inputs.get('jpeg')!)).toEqual({ present: false, valid: false, verifiable: false });
    expect(await layers.detectFingerprint(signed.get('jpeg')!)).toEqual({ present: false, confidence: 0, blocks: 0 });
    expect(existsSync(join(dataDir, 'fingerprint.key'))).toBe(false); // detection off: no secret touched
  });

  it('a secret that cannot be loaded fails detection with fingerprint_unavailable (never "not found"), and is loaded again on the next call', async () => {
    const dir = tempDir();
    const missing = join(dir, 'no-such-secret');
    const layers = new LiveLayers({ dataDir: dir, maxPixels: 1e8, signingKeyFile: undefined, fingerprintSecretFile: missing, fingerprintDetect: true });
    await expect(layers.detectFingerprint(inputs.get('png')!)).rejects.toMatchObject({ code: 'fingerprint_unavailable' });
    writeFileSync(missing, Buffer.alloc(32, 1));
    expect(await layers.detectFingerprint(inputs.get('png')!)).toMatchObject({ present: false });
  });

  it('verifying needs only the public keys: no private key on the verifier', async () => {
    const dir = tempDir();
    const k = await loadSigningKey({ dataDir: dir });
    const out = (await protectSigned(inputs.get('jpeg')!, k)).bytes;
    rmSync(join(dir, 'signing', 'current.pem'));
    const layers = new LiveLayers({ dataDir: dir, maxPixels: 1e8, signingKeyFile: undefined, fingerprintSecretFile: undefined, fingerprintDetect: false });
    expect(await layers.verifyProvenance(out)).toEqual(ALL_VALID);
    expect(existsSync(join(dir, 'signing', 'current.pem'))).toBe(false); // verify never creates a key
  });
});
