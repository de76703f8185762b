/**
 * Fixture registry: every test image the marking tests use, with a note of how it is made (as sharp's
 * test/fixtures/index.js records where each of its files came from). Nothing is checked in: each file
 * is generated on first use, per run, into a temp folder, with sharp (pixels, EXIF, ICC), ExifTool
 * (IPTC, XMP, Extended XMP the way ExifTool writes them) and the independent builders of
 * ./containers.ts (XMP packets placed exactly where a crafted case needs them).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { ExifTool } from 'exiftool-vendored';
import sharp, { type Sharp } from 'sharp';
import type { DataMiningToken } from '../../src/xmp/index.js';
import {
  type Format,
  app1Ext,
  app1Xmp,
  itxtXmp,
  jpegCom,
  isJpegXmp,
  jpegExtPortions,
  jpegLayout,
  jpegSegment,
  jpegWith,
  pngChunk,
  pngWith,
  textXmp,
  webpUnknownChunk,
  webpWith,
  webpXmpChunk,
  withXmp,
} from './containers.js';

sharp.cache(false);

export const EXT: Record<Format, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };
export const FORMATS: readonly Format[] = ['jpeg', 'png', 'webp'];

export const NS = {
  plus: 'http://ns.useplus.org/ldf/xmp/1.0/',
  plusHttps: 'https://ns.useplus.org/ldf/xmp/1.0/',
  dc: 'http://purl.org/dc/elements/1.1/',
  rdf: 'http://www.w3.org/1999/02/22-rdf-syntax-ns#',
  xmpNote: 'http://ns.adobe.com/xmp/note/',
  photoshop: 'http://ns.adobe.com/photoshop/1.0/',
} as const;

export const vocab = (token: string): string => `http://ns.useplus.org/ldf/vocab/${token}`;

/** What a fixture is for: tests pick rows by tag. */
export type Tag =
  | 'pixels' // decodes with sharp: compare raw pixels before and after
  | 'xmp' // carries XMP: compare ExifTool's XMP before and after
  | 'variant' // a crafted XMP form of the opt-out
  | 'huge' // XMP larger than one JPEG segment
  | 'animated';

export interface Fixture {
  /** File name; its extension follows the format. */
  name: string;
  format: Format;
  /** How the file is made, in one sentence (provenance). */
  how: string;
  /** What read() must say about the original. */
  optedOut: boolean;
  token?: DataMiningToken | undefined;
  /** Already says exactly what protect writes by default, where protect writes it: protect returns it unchanged. */
  marked?: boolean | undefined;
  tags: readonly Tag[];
  make(ctx: FixtureContext): Promise<Buffer>;
}

export interface FixtureContext {
  exiftool: ExifTool;
  /** Another fixture's bytes (memoised). */
  get(name: string): Promise<Buffer>;
  /** Runs ExifTool's writer over a copy of `bytes` with raw arguments and returns the result. */
  exiftoolWrite(bytes: Uint8Array, args: string[], ext: string): Promise<Buffer>;
}

// ------------------------------------------------------------------------------------------ pixels

/** Deterministic texture: gradients plus hashed noise, so JPEG and WebP do not compress to nothing. */
export function texture(width: number, height: number, channels: 1 | 3 | 4, seed = 1): Buffer {
  const px = Buffer.alloc(width * height * channels);
  let s = seed >>> 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0;
      const noise = (s >>> 24) - 128;
      const at = (y * width + x) * channels;
      for (let c = 0; c < channels; c++) {
        const grad = c === 3 ? 255 - (x * 200) / width : ((x + c * y) * 255) / (width + height);
        px[at + c] = Math.max(0, Math.min(255, grad + (c === 3 ? noise / 8 : noise / 3)));
      }
    }
  }
  return px;
}

export function rawImage(width: number, height: number, channels: 1 | 3 | 4, seed = 1): Sharp {
  return sharp(texture(width, height, channels, seed), { raw: { width, height, channels } });
}

const W = 48;
const H = 32;

// ------------------------------------------------------------------------------------------- XMP

export interface PacketOptions {
  /** Attributes on the main rdf:Description (qualified names; declare their namespaces in `ns`). */
  attrs?: Record<string, string>;
  /** Property elements inside the main rdf:Description. */
  body?: string;
  /** Namespace declarations on rdf:Description, prefix -> URI. */
  ns?: Record<string, string>;
  /** Omit the xpacket wrapper. */
  bare?: boolean;
  /** Text before the packet (XML declaration, DOCTYPE). */
  prolog?: string;
  /** Trailing padding, as writers leave for in-place edits. */
  padding?: number;
}

/** The dc properties most variants carry, so tests can see that a merge kept them. */
export const DC_BODY =
  '<dc:title><rdf:Alt><rdf:li xml:lang="x-default">A crafted title</rdf:li></rdf:Alt></dc:title>' +
  '<dc:creator><rdf:Seq><rdf:li>Ann Example</rdf:li><rdf:li>Bo Example</rdf:li></rdf:Seq></dc:creator>' +
  '<dc:subject><rdf:Bag><rdf:li>one</rdf:li><rdf:li>two</rdf:li></rdf:Bag></dc:subject>';

export function packet(o: PacketOptions = {}): string {
  const ns = { dc: NS.dc, ...o.ns };
  const decls = Object.entries(ns)
    .map(([p, uri]) => ` xmlns:${p}="${uri}"`)
    .join('');
  const attrs = Object.entries(o.attrs ?? {})
    .map(([k, v]) => ` ${k}="${v}"`)
    .join('');
  const rdf =
    `<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="optmark fixtures">\n` +
    ` <rdf:RDF xmlns:rdf="${NS.rdf}">\n` +
    `  <rdf:Description rdf:about=""${decls}${attrs}>\n   ${o.body ?? ''}\n  </rdf:Description>\n` +
    ` </rdf:RDF>\n</x:xmpmeta>`;
  const pad = o.padding ? `\n${' '.repeat(o.padding)}\n` : '\n';
  const wrapped = o.bare ? rdf : `<?xpacket begin="\uFEFF" id="W5M0MpCehiHzreSzNTczkc9d"?>\n${rdf}${pad}<?xpacket end="w"?>`;
  return (o.prolog ?? '') + wrapped;
}

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

function utf16(s: string, endian: 'le' | 'be'): Buffer {
  const le = Buffer.from(`\uFEFF${s}`, 'utf16le');
  return endian === 'le' ? le : le.swap16();
}

/** A prohibiting packet with the dc set, attribute form (the most common writer output). */
const attrPacket = (token: string, extra: PacketOptions = {}): string =>
  packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab(token) }, body: DC_BODY, ...extra });

interface Variant {
  /** Becomes the fixture name: `<key>.<ext>`, the way the held-out crafted set names files. */
  key: string;
  how: string;
  optedOut: boolean;
  token?: DataMiningToken;
  marked?: boolean;
  /** ExifTool reads the form wrongly, so its before/after comparison says nothing. */
  exiftoolMisreads?: boolean;
  /** The XMP packet bytes, or several (duplicates). */
  packets: () => Buffer[];
  /** PNG placement of the packets. */
  place?: 'beforeIdat' | 'afterIdat' | 'compressed';
}

/** Crafted XMP forms of the opt-out, each made in all three formats from the plain base images. */
export const VARIANTS: readonly Variant[] = [
  {
    key: 'attr',
    how: 'plus:DataMining as an rdf:Description attribute, with dc title/creator/subject',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING'))],
  },
  {
    key: 'element',
    how: 'plus:DataMining as element text',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    packets: () => [utf8(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining>${vocab('DMI-PROHIBITED')}</plus:DataMining>${DC_BODY}` }))],
  },
  {
    key: 'resource',
    how: 'plus:DataMining as rdf:resource',
    optedOut: true,
    token: 'DMI-PROHIBITED-SEECONSTRAINT',
    packets: () => [utf8(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining rdf:resource="${vocab('DMI-PROHIBITED-SEECONSTRAINT')}"/>${DC_BODY}` }))],
  },
  {
    key: 'https',
    how: 'the vocabulary URI written with https://',
    optedOut: true,
    token: 'DMI-PROHIBITED-AIMLTRAINING',
    packets: () => [
      utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': 'https://ns.useplus.org/ldf/vocab/DMI-PROHIBITED-AIMLTRAINING' }, body: DC_BODY })),
    ],
  },
  {
    key: 'httpsns',
    how: 'the PLUS namespace itself bound with https://',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    packets: () => [utf8(packet({ ns: { plus: NS.plusHttps }, attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED') }, body: DC_BODY }))],
  },
  {
    key: 'bare',
    how: 'a bare token (no URI), padded with white space',
    optedOut: true,
    token: 'DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING',
    packets: () => [
      utf8(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining>\n  DMI-PROHIBITED-EXCEPTSEARCHENGINEINDEXING\n</plus:DataMining>${DC_BODY}` })),
    ],
  },
  {
    key: 'prefix',
    how: 'the PLUS namespace bound to another prefix (ldf:)',
    optedOut: true,
    token: 'DMI-PROHIBITED-SEELINKEDRIGHTSEXPR',
    packets: () => [utf8(packet({ ns: { ldf: NS.plus }, attrs: { 'ldf:DataMining': vocab('DMI-PROHIBITED-SEELINKEDRIGHTSEXPR') }, body: DC_BODY }))],
  },
  {
    key: 'allowed',
    how: 'DMI-ALLOWED: not an opt-out, and protect must replace it',
    optedOut: false,
    token: 'DMI-ALLOWED',
    packets: () => [utf8(attrPacket('DMI-ALLOWED'))],
  },
  {
    key: 'unspecified',
    how: 'DMI-UNSPECIFIED: not an opt-out',
    optedOut: false,
    token: 'DMI-UNSPECIFIED',
    packets: () => [utf8(attrPacket('DMI-UNSPECIFIED'))],
  },
  {
    key: 'unknown',
    how: 'a DataMining value outside the vocabulary: not an opt-out',
    optedOut: false,
    packets: () => [utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': 'http://example.com/no-ai' }, body: DC_BODY }))],
  },
  { key: 'noplus', how: 'XMP with dc only, no DataMining', optedOut: false, packets: () => [utf8(packet({ body: DC_BODY }))] },
  {
    key: 'utf16le',
    how: 'the attribute packet encoded UTF-16LE with a BOM',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [utf16(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING'), 'le')],
  },
  {
    key: 'utf16be',
    how: 'UTF-16BE with a BOM, already saying exactly what protect writes (so protect leaves it as it is)',
    optedOut: true,
    token: 'DMI-PROHIBITED-AIMLTRAINING',
    marked: true,
    packets: () => [
      utf16(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining>${vocab('DMI-PROHIBITED-AIMLTRAINING')}</plus:DataMining>${DC_BODY}` }), 'be'),
    ],
  },
  {
    key: 'xmldecl',
    how: 'packet preceded by an XML declaration naming UTF-8, no xpacket wrapper',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING', { bare: true, prolog: '<?xml version="1.0" encoding="UTF-8"?>\n' }))],
  },
  {
    key: 'doctype',
    how: 'a DOCTYPE with an internal entity and an external (XXE) entity used in dc:rights; DataMining written plainly',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [
      utf8(
        packet({
          prolog: '<!DOCTYPE x:xmpmeta [<!ENTITY lol "lol"><!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n',
          bare: true,
          ns: { plus: NS.plus },
          attrs: { 'plus:DataMining': vocab('DMI-PROHIBITED-GENAIMLTRAINING') },
          body: `${DC_BODY}<dc:rights><rdf:Alt><rdf:li xml:lang="x-default">&xxe;&lol;</rdf:li></rdf:Alt></dc:rights>`,
        }),
      ),
    ],
  },
  {
    key: 'entity',
    how: 'the DataMining value given only through a DTD entity, which must not be expanded',
    optedOut: false,
    packets: () => [
      utf8(
        packet({
          prolog: `<!DOCTYPE x:xmpmeta [<!ENTITY dm "${vocab('DMI-PROHIBITED')}">]>\n`,
          bare: true,
          ns: { plus: NS.plus },
          body: `<plus:DataMining>&dm;</plus:DataMining>${DC_BODY}`,
        }),
      ),
    ],
  },
  {
    key: 'duplicate',
    how: 'two XMP packets: the first allows, the second prohibits (any prohibiting value opts out)',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [
      utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } })),
      utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING')),
    ],
  },
  {
    key: 'seconddesc',
    how: 'DataMining in a second rdf:Description, the dc set in the first',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    packets: () => [
      utf8(
        packet({ body: DC_BODY }).replace(
          '</rdf:RDF>',
          ` <rdf:Description rdf:about="" xmlns:plus="${NS.plus}"><plus:DataMining>${vocab('DMI-PROHIBITED')}</plus:DataMining></rdf:Description>\n </rdf:RDF>`,
        ),
      ),
    ],
  },
  {
    key: 'rdfroot',
    how: 'rdf:RDF as the root element, no x:xmpmeta and no xpacket wrapper',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [
      utf8(
        attrPacket('DMI-PROHIBITED-GENAIMLTRAINING', { bare: true })
          .replace(/^<x:xmpmeta[^>]*>\n/, '')
          .replace(/\n<\/x:xmpmeta>$/, ''),
      ),
    ],
  },
  {
    key: 'xapmeta',
    how: 'the pre-2002 x:xapmeta root',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING').replace(/x:xmpmeta/g, 'x:xapmeta'))],
  },
  {
    key: 'cdata',
    how: 'element form whose value is a CDATA section, after an XML comment',
    optedOut: true,
    token: 'DMI-PROHIBITED-SEEEMBEDDEDRIGHTSEXPR',
    packets: () => [
      utf8(
        packet({
          ns: { plus: NS.plus },
          body: `<!-- written by hand --><plus:DataMining><![CDATA[${vocab('DMI-PROHIBITED-SEEEMBEDDEDRIGHTSEXPR')}]]></plus:DataMining>${DC_BODY}`,
        }),
      ),
    ],
  },
  {
    key: 'lowercase',
    how: 'the token in lower case (ExifTool reports it raw; the vocabulary is matched without case)',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    packets: () => [utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': 'http://ns.useplus.org/ldf/vocab/dmi-prohibited' }, body: DC_BODY }))],
  },
  {
    key: 'defaultns',
    how: 'DataMining bound through a default namespace (xmlns=...) on the element; ExifTool misfiles it, so no ExifTool comparison',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    exiftoolMisreads: true,
    packets: () => [utf8(packet({ body: `<DataMining xmlns="${NS.plus}">${vocab('DMI-PROHIBITED')}</DataMining>${DC_BODY}` }))],
  },
  {
    key: 'padded',
    how: 'attribute packet with 4 KB of padding and trailing NULs',
    optedOut: true,
    token: 'DMI-PROHIBITED',
    packets: () => [Buffer.concat([utf8(attrPacket('DMI-PROHIBITED', { padding: 4096 })), Buffer.alloc(7)])],
  },
  {
    key: 'garbage',
    how: 'an XMP packet that is not well-formed XML',
    optedOut: false,
    packets: () => [utf8('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><unclosed>')],
  },
  {
    key: 'huge',
    how: 'attribute packet plus 3000 dc:subject entries and a 40 KB dc:description (about 120 KB: over one JPEG segment)',
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    packets: () => [utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING', { body: hugeBody() }))],
  },
];

/** A bare x:xmpmeta document (Extended XMP has no xpacket wrapper) around property elements. */
export const bareXmp = (body: string, ns: Record<string, string> = { dc: NS.dc }): Buffer =>
  utf8(
    `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about=""` +
      `${Object.entries(ns)
        .map(([p, uri]) => ` xmlns:${p}="${uri}"`)
        .join('')}>${body}</rdf:Description></rdf:RDF></x:xmpmeta>`,
  );

/**
 * JPEG segments for Extended XMP `ext`: a main packet naming it (plus `main` options), then its
 * portions of `portion` bytes in order. Callers reorder them to taste.
 */
export function extendedSegments(ext: Buffer, main: PacketOptions = {}, portion = 60_000): { main: Buffer; portions: Buffer[] } {
  const guid = createHash('md5').update(ext).digest('hex').toUpperCase();
  const mainPacket = packet({ ...main, ns: { xmpNote: NS.xmpNote, ...main.ns }, attrs: { 'xmpNote:HasExtendedXMP': guid, ...main.attrs } });
  const portions: Buffer[] = [];
  for (let at = 0; at < ext.length; at += portion) portions.push(app1Ext(guid, ext.length, at, ext.subarray(at, at + portion)));
  return { main: app1Xmp(utf8(mainPacket)), portions };
}

function hugeBody(): string {
  const subjects = Array.from({ length: 3000 }, (_, i) => `<rdf:li>keyword-${i.toString().padStart(5, '0')}-${'k'.repeat(8)}</rdf:li>`).join('');
  const words = Array.from({ length: 4000 }, (_, i) => `word${i % 97}`).join(' ');
  return (
    `<dc:title><rdf:Alt><rdf:li xml:lang="x-default">Huge</rdf:li></rdf:Alt></dc:title>` +
    `<dc:subject><rdf:Bag>${subjects}</rdf:Bag></dc:subject>` +
    `<dc:description><rdf:Alt><rdf:li xml:lang="x-default">${words}</rdf:li></rdf:Alt></dc:description>`
  );
}

// --------------------------------------------------------------------------------------- registry

const fixtures: Fixture[] = [];
const add = (f: Fixture): void => {
  fixtures.push(f);
};

const plainTags: readonly Tag[] = ['pixels'];

// JPEG
add({
  name: 'base.jpg',
  format: 'jpeg',
  how: `sharp: ${W}x${H} RGB texture, baseline q85, JFIF only`,
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3).jpeg({ quality: 85 }).toBuffer(),
});
add({
  name: 'progressive.jpg',
  format: 'jpeg',
  how: 'sharp: progressive q80',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3, 2).jpeg({ progressive: true, quality: 80 }).toBuffer(),
});
add({
  name: 'cmyk.jpg',
  format: 'jpeg',
  how: 'sharp: CMYK JPEG (Adobe APP14)',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3, 3).toColourspace('cmyk').jpeg().toBuffer(),
});
add({
  name: 'grey.jpg',
  format: 'jpeg',
  how: 'sharp: one-channel greyscale, 4:4:4',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 1, 4).jpeg({ chromaSubsampling: '4:4:4' }).toBuffer(),
});
add({
  name: 'metadata.jpg',
  format: 'jpeg',
  how: 'sharp: EXIF (IFD0 Artist/Copyright), Display P3 ICC and an XMP packet with dc; then ExifTool adds IPTC-IIM keywords (APP13)',
  optedOut: false,
  tags: ['pixels', 'xmp'],
  make: async (ctx) => {
    const b = await rawImage(W, H, 3, 5)
      .withExif({ IFD0: { Artist: 'Ann Example', Copyright: 'CC-BY' } })
      .withIccProfile('p3')
      .withXmp(packet({ body: DC_BODY }))
      .jpeg()
      .toBuffer();
    return ctx.exiftoolWrite(b, ['-IPTC:Keywords=alpha', '-IPTC:Keywords=beta', '-IPTC:By-line=Ann Example'], 'jpg');
  },
});
add({
  name: 'comment-junk.jpg',
  format: 'jpeg',
  how: 'base.jpg with a COM segment, junk bytes between segments and a trailer after EOI',
  optedOut: false,
  tags: ['pixels'],
  make: async (ctx) => {
    const b = await ctx.get('base.jpg');
    const withCom = jpegWith(b, [jpegCom('a comment')], 0);
    const { segments } = jpegLayout(withCom);
    const at = segments[1]!.end; // after the COM
    return Buffer.concat([withCom.subarray(0, at), Buffer.from('junk!'), withCom.subarray(at), Buffer.from('TRAILER after EOI')]);
  },
});
add({
  name: 'exiftool-extended.jpg',
  format: 'jpeg',
  how: 'ExifTool writes a 100 KB dc:description, a title and DataMining=DMI-ALLOWED: it splits the XMP into a main packet and Extended XMP',
  optedOut: false,
  token: 'DMI-ALLOWED',
  tags: ['pixels', 'xmp', 'huge'],
  make: async (ctx) =>
    ctx.exiftoolWrite(
      await ctx.get('base.jpg'),
      [`-XMP-dc:Description=${'extended description '.repeat(5000)}`, '-XMP-dc:Title=Extended title', '-XMP-plus:DataMining#=DMI-ALLOWED'],
      'jpg',
    ),
});
add({
  name: 'extended-reordered.jpg',
  format: 'jpeg',
  how: 'exiftool-extended.jpg with its Extended XMP portions reversed and moved before the main packet',
  optedOut: false,
  token: 'DMI-ALLOWED',
  tags: ['pixels', 'xmp', 'huge'],
  make: async (ctx) => {
    const src = await ctx.get('exiftool-extended.jpg');
    const portions = jpegExtPortions(src).reverse();
    const main = jpegLayout(src).segments.find(isJpegXmp)!;
    const segs = [...portions.map((p) => app1Ext(p.guid, p.full, p.offset, p.data)), jpegSegment(0xe1, main.payload)];
    return jpegWith(src, segs, 0);
  },
});
add({
  name: 'extended-only.jpg',
  format: 'jpeg',
  how: 'hand-made: the main packet names Extended XMP (xmpNote:HasExtendedXMP) that holds DataMining and a dc:description, portions out of order',
  optedOut: true,
  token: 'DMI-PROHIBITED-AIMLTRAINING',
  tags: ['pixels', 'xmp', 'huge'],
  make: async (ctx) => {
    const ext = bareXmp(
      `<plus:DataMining>${vocab('DMI-PROHIBITED-AIMLTRAINING')}</plus:DataMining>` +
        `<dc:description><rdf:Alt><rdf:li xml:lang="x-default">${'long text '.repeat(9000)}</rdf:li></rdf:Alt></dc:description>`,
      { dc: NS.dc, plus: NS.plus },
    );
    const { main, portions } = extendedSegments(ext, { body: DC_BODY });
    return jpegWith(await ctx.get('base.jpg'), [portions[1]!, main, portions[0]!], 0);
  },
});
add({
  name: 'stale-extended.jpg',
  format: 'jpeg',
  how: 'hand-made: Extended XMP with a GUID the main packet does not name, and an incomplete set (a portion missing)',
  optedOut: false,
  tags: ['pixels'],
  make: async (ctx) => {
    const ext = utf8(
      `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about="" xmlns:plus="${NS.plus}" plus:DataMining="${vocab('DMI-PROHIBITED')}"/></rdf:RDF></x:xmpmeta>`,
    );
    const guid = 'F'.repeat(32);
    return jpegWith(await ctx.get('base.jpg'), [app1Xmp(utf8(packet({ body: DC_BODY }))), app1Ext(guid, ext.length + 100, 0, ext)], 0);
  },
});

// PNG
add({
  name: 'base.png',
  format: 'png',
  how: `sharp: ${W}x${H} RGB 8-bit`,
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3).png().toBuffer(),
});
add({
  name: 'rgb16.png',
  format: 'png',
  how: 'sharp: 16-bit RGB (toColourspace rgb16)',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3, 6).toColourspace('rgb16').png().toBuffer(),
});
add({
  name: 'interlaced.png',
  format: 'png',
  how: 'sharp: Adam7 interlaced RGBA',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 4, 7).png({ progressive: true }).toBuffer(),
});
add({
  name: 'palette.png',
  format: 'png',
  how: 'sharp: palette (PLTE + tRNS) quantised',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 4, 8).png({ palette: true, colours: 16 }).toBuffer(),
});
add({ name: 'alpha.png', format: 'png', how: 'sharp: RGBA 8-bit', optedOut: false, tags: plainTags, make: async () => rawImage(W, H, 4, 9).png().toBuffer() });
add({
  name: 'icc-exif.png',
  format: 'png',
  how: 'sharp: iCCP (P3) + eXIf + XMP, which libvips writes as a zTXt chunk (keyword XML:com.adobe.xmp) before IDAT',
  optedOut: false,
  tags: ['pixels', 'xmp'],
  make: async () =>
    rawImage(W, H, 3, 10)
      .withIccProfile('p3')
      .withExif({ IFD0: { Artist: 'Ann Example' } })
      .withXmp(packet({ body: DC_BODY }))
      .png()
      .toBuffer(),
});
add({
  name: 'apng.png',
  format: 'png',
  how: 'hand-made APNG: IHDR, acTL (2 frames), fcTL, IDAT, fcTL, fdAT, tEXt, IEND',
  optedOut: false,
  tags: ['animated', 'pixels'],
  make: async () => apng(),
});
add({
  name: 'exiftool-xmp.png',
  format: 'png',
  how: 'ExifTool writes dc:Title, dc:Subject and DataMining=DMI-UNSPECIFIED into base.png (iTXt)',
  optedOut: false,
  token: 'DMI-UNSPECIFIED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) =>
    ctx.exiftoolWrite(
      await ctx.get('base.png'),
      ['-XMP-dc:Title=From ExifTool', '-XMP-dc:Subject=a', '-XMP-dc:Subject=b', '-XMP-plus:DataMining#=DMI-UNSPECIFIED'],
      'png',
    ),
});
add({
  name: 'before-and-after.png',
  format: 'png',
  how: 'two XMP iTXt chunks: DMI-ALLOWED with dc:title before IDAT, a compressed one with dc:creator after IDAT',
  optedOut: false,
  token: 'DMI-ALLOWED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) => {
    const b = await ctx.get('base.png');
    const first = pngWith(
      b,
      [
        itxtXmp(
          utf8(
            packet({
              ns: { plus: NS.plus },
              attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') },
              body: '<dc:title><rdf:Alt><rdf:li xml:lang="x-default">Before</rdf:li></rdf:Alt></dc:title>',
            }),
          ),
        ),
      ],
      'beforeIdat',
    );
    return pngWith(first, [itxtXmp(utf8(packet({ body: '<dc:creator><rdf:Seq><rdf:li>After</rdf:li></rdf:Seq></dc:creator>' })), true)], 'afterIdat', false);
  },
});
add({
  name: 'ztxt.png',
  format: 'png',
  how: 'sharp withXmp: the attr packet (GENAIMLTRAINING) in a zTXt chunk, as libvips writes XMP',
  optedOut: true,
  token: 'DMI-PROHIBITED-GENAIMLTRAINING',
  tags: ['pixels', 'xmp'],
  make: async () => rawImage(W, H, 3, 16).withXmp(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING')).png().toBuffer(),
});
add({
  name: 'text.png',
  format: 'png',
  how: 'hand-made: an element-form packet (PROHIBITED) in a tEXt chunk under the XMP keyword, before IDAT',
  optedOut: true,
  token: 'DMI-PROHIBITED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) =>
    pngWith(
      await ctx.get('base.png'),
      [textXmp('tEXt', utf8(packet({ ns: { plus: NS.plus }, body: `<plus:DataMining>${vocab('DMI-PROHIBITED')}</plus:DataMining>${DC_BODY}` })))],
      'afterIhdr',
    ),
});
add({
  name: 'itxt-then-ztxt.png',
  format: 'png',
  how: 'hand-made: an iTXt packet (ALLOWED, dc:title) after IHDR, then a zTXt packet (ALLOWED) before IDAT: ours must end up after the zTXt',
  optedOut: false,
  token: 'DMI-ALLOWED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) =>
    pngWith(
      await ctx.get('base.png'),
      [itxtXmp(utf8(attrPacket('DMI-ALLOWED'))), textXmp('zTXt', utf8(packet({ ns: { plus: NS.plus }, attrs: { 'plus:DataMining': vocab('DMI-ALLOWED') } })))],
      'afterIhdr',
    ),
});
add({
  name: 'xmp-after-iend.png',
  format: 'png',
  how: 'base.png followed by bytes after IEND (a trailer that must be kept)',
  optedOut: false,
  tags: ['pixels'],
  make: async (ctx) => Buffer.concat([await ctx.get('base.png'), Buffer.from('trailing bytes after IEND')]),
});

// WebP
add({
  name: 'base.webp',
  format: 'webp',
  how: 'sharp: simple lossy (VP8 only)',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3).webp({ quality: 80 }).toBuffer(),
});
add({
  name: 'lossless.webp',
  format: 'webp',
  how: 'sharp: simple lossless (VP8L only, no alpha bit)',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 3, 11).webp({ lossless: true }).toBuffer(),
});
add({
  name: 'lossless-alpha.webp',
  format: 'webp',
  how: 'sharp: simple lossless with the VP8L alpha bit set',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 4, 12).webp({ lossless: true }).toBuffer(),
});
add({
  name: 'lossy-alpha.webp',
  format: 'webp',
  how: 'sharp: lossy with alpha (VP8X + ALPH + VP8)',
  optedOut: false,
  tags: plainTags,
  make: async () => rawImage(W, H, 4, 13).webp({ quality: 70 }).toBuffer(),
});
add({
  name: 'animated.webp',
  format: 'webp',
  how: 'sharp: 3-frame animation from a raw strip with pageHeight (VP8X + ANIM + ANMF)',
  optedOut: false,
  tags: ['animated', 'pixels'],
  make: async () =>
    sharp(texture(W, H * 3, 4, 14), { raw: { width: W, height: H * 3, channels: 4, pageHeight: H } })
      .webp({ quality: 70, loop: 2 })
      .toBuffer(),
});
add({
  name: 'icc-exif.webp',
  format: 'webp',
  how: 'sharp: VP8X + ICCP (P3) + VP8 + EXIF',
  optedOut: false,
  tags: plainTags,
  make: async () =>
    rawImage(W, H, 3, 15)
      .withIccProfile('p3')
      .withExif({ IFD0: { Artist: 'Ann Example' } })
      .webp()
      .toBuffer(),
});
add({
  name: 'odd-unknown.webp',
  format: 'webp',
  how: 'lossless.webp extended by hand with an unknown odd-sized chunk (pad byte) after the image',
  optedOut: false,
  tags: plainTags,
  make: async (ctx) => webpWith(await ctx.get('lossless.webp'), [webpUnknownChunk('ZZZZ', Buffer.from('odd'))], 0),
});
add({
  name: 'exiftool-xmp.webp',
  format: 'webp',
  how: 'ExifTool writes dc:Title and DataMining=DMI-ALLOWED into base.webp (ExifTool makes it VP8X)',
  optedOut: false,
  token: 'DMI-ALLOWED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) => ctx.exiftoolWrite(await ctx.get('base.webp'), ['-XMP-dc:Title=From ExifTool', '-XMP-plus:DataMining#=DMI-ALLOWED'], 'webp'),
});
add({
  name: 'misplaced-xmp.webp',
  format: 'webp',
  how: 'hand-made: XMP chunk before the image data and no XMP flag in VP8X',
  optedOut: true,
  token: 'DMI-PROHIBITED',
  tags: ['pixels', 'xmp'],
  make: async (ctx) => {
    const b = webpWith(await ctx.get('base.webp'), [], 0);
    const x = webpXmpChunk(utf8(attrPacket('DMI-PROHIBITED')));
    const out = Buffer.concat([b.subarray(0, 30), x, b.subarray(30)]); // after the 18-byte VP8X
    out.writeUInt32LE(out.length - 8, 4);
    return out;
  },
});

// Crafted XMP variants in every format.
for (const v of VARIANTS) {
  for (const format of FORMATS) {
    // A JPEG segment cannot hold it: the JPEG form of a huge packet is Extended XMP (fixtures above).
    if (v.key === 'huge' && format === 'jpeg') continue;
    add({
      name: `${v.key}.${EXT[format]}`,
      format,
      how: `${v.how}; in base.${EXT[format]}${format === 'png' ? ` (${v.place ?? 'beforeIdat'})` : ''}`,
      optedOut: v.optedOut,
      token: v.token,
      marked: v.marked,
      tags: ['pixels', 'variant', ...(v.exiftoolMisreads ? [] : (['xmp'] as const)), ...(v.key === 'huge' ? (['huge'] as const) : [])],
      make: async (ctx) => {
        const base = await ctx.get(`base.${EXT[format]}`);
        const [first, ...rest] = v.packets();
        let out = withXmp(format, base, first!, v.place);
        for (const p of rest) out = appendXmp(format, out, p);
        return out;
      },
    });
  }
}
// PNG placements of the attribute packet.
for (const place of ['afterIdat', 'compressed'] as const) {
  add({
    name: `attr-${place}.png`,
    format: 'png',
    how: `the attr packet in an iTXt ${place === 'compressed' ? 'compressed and placed after IDAT' : 'after IDAT'}`,
    optedOut: true,
    token: 'DMI-PROHIBITED-GENAIMLTRAINING',
    tags: ['pixels', 'xmp', 'variant'],
    make: async (ctx) => withXmp('png', await ctx.get('base.png'), utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING')), place),
  });
}
add({
  name: 'attr-compressed-before.png',
  format: 'png',
  how: 'the attr packet in a compressed iTXt before IDAT',
  optedOut: true,
  token: 'DMI-PROHIBITED-GENAIMLTRAINING',
  tags: ['pixels', 'xmp', 'variant'],
  make: async (ctx) => pngWith(await ctx.get('base.png'), [itxtXmp(utf8(attrPacket('DMI-PROHIBITED-GENAIMLTRAINING')), true)], 'afterIhdr'),
});

/** A second XMP packet after the first (duplicates), where each format would hold one. */
function appendXmp(format: Format, b: Buffer, p: Buffer): Buffer {
  if (format === 'jpeg') {
    const { segments, scan } = jpegLayout(b);
    const lastXmp = segments.map((s) => s.marker).lastIndexOf(0xe1);
    const at = lastXmp >= 0 ? segments[lastXmp]!.end : scan;
    return Buffer.concat([b.subarray(0, at), app1Xmp(p), b.subarray(at)]);
  }
  if (format === 'png') return pngWith(b, [itxtXmp(p)], 'afterIdat', false);
  const out = Buffer.concat([b, webpXmpChunk(p)]);
  out.writeUInt32LE(out.length - 8, 4);
  return out;
}

/** A two-frame APNG made chunk by chunk (sharp does not write APNG). */
async function apng(): Promise<Buffer> {
  const w = 16;
  const h = 12;
  const frame = (seed: number): Buffer => {
    const rgba = texture(w, h, 4, seed);
    const rows: Buffer[] = [];
    for (let y = 0; y < h; y++) rows.push(Buffer.from([0]), rgba.subarray(y * w * 4, (y + 1) * w * 4));
    return deflateSync(Buffer.concat(rows));
  };
  const u32 = (...v: number[]): Buffer => Buffer.concat(v.map((n) => Buffer.from([(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255])));
  const fctl = (seq: number): Buffer => Buffer.concat([u32(seq, w, h, 0, 0), Buffer.from([0, 1, 0, 10, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', Buffer.concat([u32(w, h), Buffer.from([8, 6, 0, 0, 0])])),
    pngChunk('acTL', u32(2, 0)),
    pngChunk('fcTL', fctl(0)),
    pngChunk('IDAT', frame(21)),
    pngChunk('fcTL', fctl(1)),
    pngChunk('fdAT', Buffer.concat([u32(2), frame(22)])),
    pngChunk('tEXt', Buffer.from('Comment\0made by hand', 'latin1')),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

export const FIXTURES: ReadonlyMap<string, Fixture> = new Map(fixtures.map((f) => [f.name, f]));

// -------------------------------------------------------------------------------------- materialise

/**
 * Makes fixtures on demand into one temp folder per test file, with the file's one ExifTool process
 * (exiftool-vendored starts it on first use). Call `close()` in afterAll: it ends ExifTool and removes
 * the folder.
 */
export class FixtureSet {
  readonly dir = mkdtempSync(join(tmpdir(), 'optmark-fixtures-'));
  readonly exiftool = new ExifTool({ maxProcs: 1 });
  private readonly made = new Map<string, Promise<Buffer>>();
  private seq = 0;
  private readonly ctx: FixtureContext;

  constructor() {
    const exiftool = this.exiftool;
    this.ctx = {
      exiftool,
      get: (name) => this.bytes(name),
      exiftoolWrite: async (bytes, args, ext) => {
        const path = this.write(`exiftool-in.${ext}`, bytes);
        await exiftool.write(path, {}, { writeArgs: [...args, '-overwrite_original'] });
        return readFile(path);
      },
    };
  }

  bytes(name: string): Promise<Buffer> {
    let p = this.made.get(name);
    if (!p) {
      const f = FIXTURES.get(name);
      if (!f) throw new Error(`no fixture named ${name}`);
      p = f.make(this.ctx);
      this.made.set(name, p);
    }
    return p;
  }

  /** Writes bytes to a fresh file in the temp folder (ExifTool reads paths) and returns its path. */
  write(name: string, bytes: Uint8Array): string {
    const path = join(this.dir, `${this.seq++}-${name}`);
    writeFileSync(path, bytes);
    return path;
  }

  async close(): Promise<void> {
    await this.exiftool.end();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
