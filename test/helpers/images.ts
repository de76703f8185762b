// Test images made on the spot (nothing binary in the repository): small real images from sharp, and
// large or slow ones assembled byte by byte where only their container matters.
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import sharp from 'sharp';
import { MAX_MARKUP_PER_FILE } from '../../src/xmp/packet.js';

export type Format = 'jpeg' | 'png' | 'webp';

export const MIME: Record<Format, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp' };
export const EXT: Record<Format, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };

/** A small photo-like image (noise over a gradient, so encoders do real work) in `format`. */
export async function smallImage(format: Format, width = 96, height = 64): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      raw[i] = (x * 255) / width;
      raw[i + 1] = (y * 255) / height;
      raw[i + 2] = ((x ^ y) * 37) & 0xff;
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .toFormat(format)
    .toBuffer();
}

/** The format the bytes really are, by their magic numbers. */
export function sniff(bytes: Buffer): Format | undefined {
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return undefined;
}

/**
 * A JPEG of exactly `size` bytes: a real small JPEG's header segments, then its scan start followed by
 * random "entropy-coded data" and EOI. The container code keeps everything from the scan on as an opaque
 * tail, so this is a valid upload of any size without encoding megapixels.
 */
export async function jpegOfSize(size: number): Promise<Buffer> {
  const small = await smallImage('jpeg', 16, 16);
  const sos = small.indexOf(Buffer.from([0xff, 0xda]));
  const head = small.subarray(0, sos);
  const sosLength = small.readUInt16BE(sos + 2) + 2;
  const fill = size - head.length - sosLength - 2;
  if (fill < 0) throw new Error(`a JPEG cannot be smaller than ${size - fill} bytes here`);
  // Random bytes without 0xff, so no marker appears inside the "scan".
  const data = randomBytes(fill);
  for (let i = 0; i < data.length; i++) if (data[i] === 0xff) data[i] = 0xfe;
  return Buffer.concat([head, small.subarray(sos, sos + sosLength), data, Buffer.from([0xff, 0xd9])]);
}

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed));
  return Buffer.concat([len, typed, crc]);
}

/**
 * A small PNG whose XMP packet holds `items` keywords, by default as many as a file's markup limit lets
 * through. Parsing a packet that large takes the worker a long time (0.5-1.5 s for 25,000 on a shared
 * core): the test's slow task, for deadlines and a full pool.
 */
export async function slowPng(items = Math.floor(MAX_MARKUP_PER_FILE / 2) - 50): Promise<Buffer> {
  const png = await smallImage('png', 16, 16);
  const keywords = Array.from({ length: items }, (_, i) => `<rdf:li>keyword ${i}</rdf:li>`).join('');
  const xmp =
    '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">' +
    '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" ' +
    `xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:subject><rdf:Bag>${keywords}</rdf:Bag></dc:subject>` +
    '</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>';
  // iTXt: keyword, NUL, compression flag 0, method 0, empty language NUL, empty translated keyword NUL, text.
  const itxt = pngChunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\0\0\0\0', 'latin1'), Buffer.from(xmp, 'utf8')]));
  const afterIhdr = 8 + 8 + 13 + 4;
  return Buffer.concat([png.subarray(0, afterIhdr), itxt, png.subarray(afterIhdr)]);
}

/** A 1x1 GIF: a real image, but not a format the service accepts. */
export const GIF = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');
