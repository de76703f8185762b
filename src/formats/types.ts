/**
 * The one structure a container module parses a file into, and the one interface every container module
 * implements (the registry is src/formats/index.ts).
 *
 * One walk per file: `format.parse(bytes)` (or `parseImage(bytes)`) walks the container's segments or
 * chunks once and answers everything the rest of optmark asks of a file's structure:
 *
 * - `xmp`: the XMP packets as raw UTF-8 (src/xmp parses them; it never sees a marker or a chunk);
 * - `truncated`: whether the image data is whole (a file cut off in its pixel data is still marked);
 * - `manifestStore`: the C2PA manifest store (Content Credentials) and the byte ranges that carry it;
 * - `copyRanges`: the stretches of the input a rewrite keeps byte for byte and that nothing here reads
 *   (the image data), which a caller holding the file rather than its bytes copies file to file;
 * - `quantTables`: a JPEG's quantisation tables; `lossless`: whether the image data is coded losslessly;
 * - `writeXmp`, `contentOutsideXmp`, `decoderInput`: the rewrites, from the same walk.
 *
 * What is not always asked (inflating compressed XMP, searching a JPEG's scan for its end marker, its
 * trailers, the store's and copy ranges, quantisation tables) is computed on first use and kept in the
 * structure, never in a module-level cache: a structure describes the bytes it was parsed from, which
 * must not change under it.
 *
 * Every walk obeys one set of named limits (src/formats/limits.ts), and every rewrite checks that its
 * output stays within them, so protect never produces a file that verify or protect refuses.
 *
 * A file-backed caller (batch marking) passes `need`: the parse calls it for every range it reads before
 * it reads it (segment and chunk headers, metadata payloads, the first bytes of a bitstream, a JPEG's end
 * marker and trailers), and never for the rest of a copy range. `bytes` then has the file's full length,
 * holding what `need` read; the pieces writeXmp returns are views of it, and those within a copy range
 * are copied from the file rather than from memory. What is read on first use (`truncated`,
 * `copyRanges`, `manifestStore`, writeXmp's trailer offsets) calls `need` then: keep the file open while
 * the structure is in use.
 */

/** A byte range [start, end) of the file. */
export interface ByteRange {
  start: number;
  end: number;
}

/** Makes bytes [start, end) of the file readable in the parse's `bytes` (file-backed callers); called before they are read. */
export type Need = (start: number, end: number) => void;

/** A C2PA manifest store where the container puts one (JPEG APP11 JUMBF segments, PNG `caBX`, WebP `C2PA`). */
export interface ManifestStore {
  /** Each segment or chunk that carries part of the store, whole (header included), in file order. */
  ranges: ByteRange[];
}

/** One JPEG quantisation table (a DQT entry), as stored. */
export interface QuantTable {
  /** Destination identifier (0 is the luminance table of every common encoder). */
  id: number;
  /** 8 or 16 bits per value. */
  precision: 8 | 16;
  /** The 64 values in the order the DQT stores them (zigzag). */
  values: number[];
}

/** Everything one walk of a file says; see the top of this file. */
export interface ParsedImage {
  readonly format: ContainerFormat;
  /** The bytes it was parsed from (file-backed: the file's length, holding what `need` read). */
  readonly bytes: Uint8Array;
  /** XMP packets, read on first use (PNG: compressed packets inflated within the file's budget). */
  readonly xmp: XmpPayload;
  /**
   * Undefined when the image data is whole; else the sentence that says where it is cut (the
   * `truncated_image_data` warning, src/formats/complete.ts). Read on first use.
   */
  readonly truncated: string | undefined;
  /** The file's C2PA manifest store; undefined when it carries none. */
  readonly manifestStore: ManifestStore | undefined;
  /** Stretches of the input that writeXmp keeps byte for byte and whose bytes nothing here depends on, sorted and disjoint. */
  readonly copyRanges: readonly ByteRange[];
  /** JPEG: the quantisation tables before the first scan, in file order; empty for PNG and WebP. */
  readonly quantTables: readonly QuantTable[];
  /** True when the image data is coded losslessly (PNG; a WebP whose image is VP8L); false for JPEG and lossy WebP. */
  readonly lossless: boolean;
  /**
   * The new file whose only XMP is `xmp`, as pieces in order (mostly views of `bytes`: the caller
   * hashes and encodes them without first copying them into one buffer). Every other segment/chunk is
   * kept byte for byte, in order. Throws OutputTooLargeError when the file it would produce breaks a
   * limit its own reader enforces (segments or chunks, XMP packets).
   */
  writeXmp(xmp: XmpToWrite): Uint8Array[];
  /**
   * The file's content outside its XMP, as slices in order (one per segment or chunk), for digests that
   * must survive XMP edits (provenance). Container bookkeeping that XMP edits change (WebP VP8X flags,
   * RIFF size) is left out.
   */
  contentOutsideXmp(): Uint8Array[];
  /**
   * The file as an image decoder needs it: the image data and what shapes its pixels (palette,
   * transparency, colour profile), without the metadata a decoder would parse for nothing (text,
   * XMP, EXIF, comments; PNG text can be compressed, and a decoder inflates it without our bounds).
   * The input itself when there is nothing to drop.
   */
  decoderInput(): Uint8Array;
}

/** XMP found in a container, as raw UTF-8 bytes, not yet parsed. */
export interface XmpPayload {
  /** Standalone XMP packets in file order; the first is the main packet when `mainIndex` is 0. */
  packets: Uint8Array[];
  /** JPEG Extended XMP, reassembled and length-checked, keyed by the GUID its segments carry. */
  extended: Map<string, Uint8Array>;
  /**
   * True when the container already holds its XMP exactly as writeXmp would place it (one packet, in
   * the preferred position, no strays), so that a packet with the right content needs no rewrite.
   */
  canonical: boolean;
  /**
   * How many of `packets`, the last ones, writeXmp keeps byte for byte beside the packet it writes (PNG
   * `tEXt`/`zTXt` XMP); 0 elsewhere. Protect counts them when it checks that its output stays readable.
   */
  keptOnRewrite: number;
}

/** What writeXmp puts into the container. */
export interface XmpToWrite {
  /** The main packet, UTF-8. */
  main: Uint8Array;
  /** JPEG only: Extended XMP (the full serialised extension and the GUID that names it). */
  extended?: { guid: string; data: Uint8Array } | undefined;
}

export interface ContainerFormat {
  readonly name: 'jpeg' | 'png' | 'webp';
  readonly mimeType: string;
  readonly extension: string;
  /** Largest main packet the container can hold in one piece (JPEG: one APP1 segment). */
  readonly maxMainPacketBytes: number;
  /** Whether the container can carry Extended XMP (JPEG only). */
  readonly extendedXmp: boolean;
  /** True when the bytes start with this format's signature. */
  sniff(bytes: Uint8Array): boolean;
  /**
   * The one walk of the file. Throws DamagedImageError when the structure before the image data is
   * broken, LimitExceededError past a limit of src/formats/limits.ts.
   */
  parse(bytes: Uint8Array, need?: Need): ParsedImage;
  /**
   * Whether one slice of contentOutsideXmp (a whole segment or chunk) carries part of a C2PA manifest
   * store (provenance digests leave those out when asked).
   */
  isManifestStoreSlice(slice: Uint8Array): boolean;
  /** parse(bytes).xmp */
  readXmp(bytes: Uint8Array): XmpPayload;
  /** parse(bytes).writeXmp(xmp) */
  writeXmp(bytes: Uint8Array, xmp: XmpToWrite): Uint8Array[];
  /** parse(bytes).contentOutsideXmp() */
  contentOutsideXmp(bytes: Uint8Array): Uint8Array[];
  /** parse(bytes).decoderInput() */
  decoderInput(bytes: Uint8Array): Uint8Array;
}
