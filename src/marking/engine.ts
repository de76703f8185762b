/**
 * The marking engine: pure functions from image bytes to image bytes. protect() writes the PLUS
 * DataMining opt-out by editing container bytes only (never pixels); read() reports what a file says.
 * Everything else (HTTP, CLI, the layers) calls these.
 */
import { assemble, sameBytes } from '../formats/bytes.js';
import { parseImage, type ContainerFormat, type ParsedImage, type XmpPayload, type XmpToWrite } from '../formats/index.js';
import { truncationWarnings, type Warning } from '../formats/complete.js';
import { MAX_PROTECT_GROWTH_BYTES, OutputTooLargeError } from '../formats/limits.js';
import {
  type DataMiningToken,
  type Document,
  DEFAULT_TOKEN,
  carriesExactly,
  checkOutputMarkup,
  encodeForContainer,
  freshPacket,
  mergedDocument,
  openPayload,
  readPayload,
  setDataMining,
  type RslReading,
  type TdmRepReading,
  type XmpView,
} from '../xmp/index.js';

export const SIGNAL_DATA_MINING = 'iptc.dataMining';

export interface ProtectResult {
  /** The produced file as pieces in order (views of the input and new segments). */
  pieces: Uint8Array[];
  /** The produced file in one buffer (assembled on first use). */
  readonly bytes: Uint8Array;
  format: ContainerFormat['name'];
  mimeType: string;
  extension: string;
  signals: string[];
  /** False when the input already carried the field exactly as protect writes it (bytes returned as they came). */
  changed: boolean;
  /** What a pipeline should know about the input (e.g. truncated_image_data); empty when nothing. */
  warnings: Warning[];
  /** The input's structure (its one walk): callers ask it for what else they need (Content Credentials, copy ranges). */
  image: ParsedImage;
}

export interface ReadResult {
  format: ContainerFormat['name'];
  mimeType: string;
  optedOut: boolean;
  signals: string[];
  /** The raw DataMining values found, as written. */
  values: string[];
  token: DataMiningToken | undefined;
  /** What a pipeline should know about the input (e.g. truncated_image_data); empty when nothing. */
  warnings: Warning[];
  /** W3C TDMRep in the XMP (tdm:reservation, tdm:policy): reported beside the IPTC field, never in `optedOut`. */
  tdmrep: TdmRepReading;
  /** An RSL licence in the XMP (src/xmp/rsl.ts): reported beside the IPTC field, never in `optedOut`. */
  rsl: RslReading;
}

export interface ProtectOptions {
  /** The DataMining token to write; a prohibiting one (default DMI-PROHIBITED-AIMLTRAINING). */
  token?: DataMiningToken;
  /** Further edits to the merged XMP document (the provenance layer adds its tag here). */
  edit?: (doc: Document) => void;
  /**
   * Largest file protect may produce (the server passes its upload limit: what it answers must be
   * something it would accept back). Beyond it, or beyond the input plus MAX_PROTECT_GROWTH_BYTES,
   * protect throws OutputTooLargeError before building the file.
   */
  maxOutputBytes?: number;
  /**
   * False leaves out the look at the image data (the `warnings`, then empty): for callers that do not
   * report them and may hand over only a JPEG's bytes up to its image data (batch marking).
   */
  warnings?: boolean;
}

/**
 * Writes the opt-out field into the image's XMP, merging with what is there; same format out. Takes the
 * bytes, or their structure when the caller has walked them already (a file-backed source: parseImage
 * with `need`).
 */
export function protect(source: Uint8Array | ParsedImage, options: ProtectOptions = {}): ProtectResult {
  const image = source instanceof Uint8Array ? parseImage(source) : source;
  const { format, bytes: input } = image;
  const token = options.token ?? DEFAULT_TOKEN;
  const payload = image.xmp;
  const view = openPayload(payload);
  const warnings = options.warnings === false ? [] : truncationWarnings(image);
  const result = (pieces: Uint8Array[], changed: boolean): ProtectResult => {
    let bytes: Uint8Array | undefined = pieces.length === 1 ? pieces[0] : undefined;
    return {
      pieces,
      get bytes() {
        return (bytes ??= assemble(pieces));
      },
      format: format.name,
      mimeType: format.mimeType,
      extension: format.extension,
      signals: [SIGNAL_DATA_MINING],
      changed,
      warnings,
      image,
    };
  };
  // Idempotence: a file already marked exactly this way comes back byte for byte.
  if (!options.edit && payload.canonical && carriesExactly(view, token)) return result([input], false);
  const xmp =
    !options.edit && payload.packets.length === 0 && payload.extended.size === 0 ? { main: freshPacket(token) } : rewrite(view, token, format, options.edit);
  // The rewrite may land on what is already there (text XMP kept beside ours, an edit that changed
  // nothing): then too the file comes back as it came.
  if (payload.canonical && holdsAlready(payload, xmp)) return result([input], false);
  checkOutputMarkup(xmp, payload.packets.slice(payload.packets.length - payload.keptOnRewrite));
  const pieces = image.writeXmp(xmp);
  checkOutputSize(input.length, pieces, options.maxOutputBytes);
  return result(pieces, true);
}

/**
 * The produced file's size, known from its pieces before any byte is copied: within the input plus
 * MAX_PROTECT_GROWTH_BYTES and within `max`, else OutputTooLargeError.
 */
export function checkOutputSize(inputLength: number, pieces: readonly Uint8Array[], max: number | undefined): void {
  let size = 0;
  for (const p of pieces) size += p.length;
  if (size - inputLength > MAX_PROTECT_GROWTH_BYTES) {
    throw new OutputTooLargeError(
      `Marking would grow the image from ${inputLength} to ${size} bytes; protect adds at most ${MAX_PROTECT_GROWTH_BYTES} bytes (compressed XMP is written back uncompressed).`,
    );
  }
  checkWithinUploadLimit(size, max);
}

/** A produced file of `size` bytes within `max`, the server's upload limit (optmark never answers one it would refuse), else OutputTooLargeError. */
export function checkWithinUploadLimit(size: number, max: number | undefined): void {
  if (max !== undefined && size > max) throw new OutputTooLargeError(`The marked image would be ${size} bytes, over the ${max}-byte upload limit.`);
}

function rewrite(view: XmpView, token: DataMiningToken, format: ContainerFormat, edit: ProtectOptions['edit']): XmpToWrite {
  const doc = mergedDocument(view);
  setDataMining(doc, token);
  edit?.(doc);
  return encodeForContainer(doc, format.maxMainPacketBytes, format.extendedXmp);
}

function holdsAlready(payload: XmpPayload, xmp: XmpToWrite): boolean {
  const main = payload.packets[0];
  if (!main || !sameBytes(main, xmp.main)) return false;
  if (!xmp.extended) return payload.extended.size === 0;
  const ext = payload.extended.get(xmp.extended.guid);
  return payload.extended.size === 1 && ext !== undefined && sameBytes(ext, xmp.extended.data);
}

/** Reads the opt-out state of an image: opted out exactly when a prohibiting DataMining value is present. */
export function read(source: Uint8Array | ParsedImage): ReadResult {
  const image = source instanceof Uint8Array ? parseImage(source) : source;
  const { format } = image;
  const { optOut: reading, tdmrep, rsl } = readPayload(image.xmp);
  return {
    format: format.name,
    mimeType: format.mimeType,
    optedOut: reading.optedOut,
    signals: reading.optedOut ? [SIGNAL_DATA_MINING] : [],
    values: reading.values,
    token: reading.token,
    warnings: truncationWarnings(image),
    tdmrep,
    rsl,
  };
}
