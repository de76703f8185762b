/**
 * Is the image data whole? The container parsers stop where the image data begins (JPEG: the first
 * SOS; PNG: the chunks after the first IDAT are walked but a cut or garbled stretch is kept verbatim),
 * because marking needs nothing past it and keeps it byte for byte. So a file cut off in its pixel data
 * is marked (200): the container up to the image data is intact and the metadata edit is exact
 * (docs/marking.md). The structure's `truncated` says when that happened (a search for the end marker
 * after the scan for JPEG, the chunk headers up to IEND for PNG; a WebP shorter than its RIFF size is
 * refused by the parser); this module turns it into the `truncated_image_data` warning of protect's and
 * verify's answers. It reads no pixels.
 */
import type { ParsedImage } from './types.js';

/** A warning of a protect or verify answer (the shared `warnings` array: docs/openapi.json). */
export interface Warning {
  code: string;
  message: string;
}

export const TRUNCATED_IMAGE_DATA = 'truncated_image_data';

/** The warnings about the image data of a parsed file (empty when whole). */
export function truncationWarnings(image: ParsedImage): Warning[] {
  const message = image.truncated;
  return message ? [{ code: TRUNCATED_IMAGE_DATA, message: `${message} It was marked anyway: the container up to the image data is intact.` }] : [];
}
