/**
 * Detection of a C2PA manifest store (Content Credentials) without parsing it, from the container's one
 * walk (src/formats: the JPEG XT segments carrying a JUMBF box of the C2PA type, the PNG and WebP
 * chunks of the store). Files without credentials pay that walk and nothing else; the validating
 * reader (src/c2pa/reader.ts) runs only when a store is present. The walk's limits are the container
 * readers' (src/formats/limits.ts), so detection refuses exactly what protect and verify refuse.
 */
import { FORMATS } from '../formats/index.js';
import { MAX_CONTAINER_ENTRIES } from '../formats/limits.js';

/** Segments (JPEG) or chunks (PNG, WebP) a walk records at most: the container readers' limit. */
export const MAX_C2PA_WALK = MAX_CONTAINER_ENTRIES;

export type C2paContainer = 'jpeg' | 'png' | 'webp';

/**
 * Whether one slice of contentOutsideXmp (a whole JPEG segment, PNG chunk or WebP chunk) belongs to a
 * C2PA manifest store (a JPEG XT segment carrying a JUMBF box, the PNG or WebP store chunk).
 */
export function isManifestStoreSlice(format: C2paContainer, slice: Uint8Array): boolean {
  return FORMATS.get(format)!.isManifestStoreSlice(slice);
}

/**
 * True when the file carries a C2PA manifest store where its container puts one. Walks the file: a
 * caller holding its structure asks `manifestStore` there instead. Throws as the container parser does
 * (damaged_image, limit_exceeded).
 */
export function hasManifestStore(format: C2paContainer, bytes: Uint8Array): boolean {
  return FORMATS.get(format)!.parse(bytes).manifestStore !== undefined;
}
