/**
 * The one interface every container module implements. Containers know where XMP packets live and how
 * to put one back; they never parse XML (src/xmp does, and never sees a marker or a chunk).
 */

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
  /** Finds the XMP packets; throws DamagedImageError when the structure before the image data is broken. */
  readXmp(bytes: Uint8Array): XmpPayload;
  /**
   * The new file whose only XMP is `xmp`, as pieces in order (mostly views of `bytes`: the caller
   * hashes and encodes them without first copying them into one buffer). Every other segment/chunk is
   * kept byte for byte, in order. Throws OutputTooLargeError when the file it would produce breaks a
   * limit its own reader enforces (segments or chunks before the image data, XMP packets).
   */
  writeXmp(bytes: Uint8Array, xmp: XmpToWrite): Uint8Array[];
  /**
   * The file's content outside its XMP, as slices in order, for digests that must survive XMP edits
   * (provenance). Container bookkeeping that XMP edits change (WebP VP8X flags, RIFF size) is left out.
   */
  contentOutsideXmp(bytes: Uint8Array): Uint8Array[];
  /**
   * The file as an image decoder needs it: the image data and what shapes its pixels (palette,
   * transparency, colour profile), without the metadata a decoder would parse for nothing (text,
   * XMP, EXIF, comments; PNG text can be compressed, and a decoder inflates it without our bounds).
   * The input itself when there is nothing to drop. Throws like readXmp on a broken structure.
   */
  decoderInput(bytes: Uint8Array): Uint8Array;
}
