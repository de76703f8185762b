/**
 * A file as the pipeline's input, for a batch lane: every byte (readWhole), or, for a verify of the
 * metadata alone, its structure (src/formats, one walk) from the bytes the walk asks for, read at their
 * offsets into a buffer as long as the file (readHead). What the walk never asks for are its copy ranges
 * (a JPEG's scan, PNG image data, a WebP bitstream past its header): they stay unread.
 */
import { detectFormat, parseImage, type ContainerFormat, type ParsedImage } from '../formats/index.js';
import type { ReadBuffer, Source } from './files.js';

/** Enough of a file's first bytes to tell its format. */
const SNIFF_BYTES = 16;
/**
 * Reads go on at least this far past what was read, so that a walk over many small segments or chunks
 * costs a few system calls: most JPEGs' segments before the image data fit in a few KiB.
 */
const READ_AHEAD_BYTES = 16 * 1024;

/** The format of an opened file from its first bytes, or undefined when it is none of the three. */
export function sniff(buffer: ReadBuffer, source: Source): ContainerFormat | undefined {
  return detectFormat(buffer.readStart(source, SNIFF_BYTES));
}

/** The whole file, walked. Throws the walk's typed errors, and FileError for a file that changed. */
export function readWhole(buffer: ReadBuffer, source: Source): ParsedImage {
  return parseImage(buffer.readAll(source));
}

/**
 * The file walked from the bytes the walk reads (see the top of this file); its copy ranges are left
 * unread. The buffer holds the file's length; the structure's `bytes` is valid until the buffer's next read.
 */
export function readHead(buffer: ReadBuffer, source: Source): ParsedImage {
  const size = source.stats.size;
  buffer.reserve(size);
  let filled = 0;
  const need = (start: number, end: number): void => {
    const to = Math.min(end, size);
    if (to <= filled) return;
    if (start > filled) {
      // Far ahead (a JPEG's last two bytes): that stretch alone.
      buffer.readAt(source.fd, start, to);
      return;
    }
    const upTo = Math.min(size, Math.max(to, filled + READ_AHEAD_BYTES));
    buffer.readAt(source.fd, filled, upTo);
    filled = upTo;
  };
  const image = parseImage(buffer.view(size), need);
  // As readAll: a file that grew since its fstat is refused (one byte read at its size must find its end).
  buffer.checkEnd(source);
  return image;
}
