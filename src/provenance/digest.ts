/**
 * The content digest a tag signs: SHA-256 over the file's content outside its XMP, as the container
 * module slices it (contentOutsideXmp: every segment/chunk except XMP and the bookkeeping XMP edits
 * change). Each slice is preceded by its length, so bytes cannot move across slice boundaries without
 * changing the digest. Costs one pass of SHA-256 over the file (about 2 ms per MB): verify only pays it
 * once a tag is present and its signature checks.
 *
 * A C2PA manifest store is left out (src/c2pa/detect.ts): it is signed on its own, and an update
 * manifest added after the tag (OPTMARK_C2PA=update on the layer path) replaces it. Files without a
 * store have the same digest either way; tags signed before this rule over a file with a store are
 * checked against the digest with the store (`withManifestStore`).
 */
import { createHash } from 'node:crypto';
import { isManifestStoreSlice } from '../c2pa/detect.js';
import type { ContainerFormat, ParsedImage } from '../formats/index.js';

const DIGEST_DOMAIN = 'optmark content outside xmp v1';

/** `sha256:<hex>` of the content outside the XMP of the file (its structure when the caller holds it); throws DamagedImageError like the container does. */
export function contentDigest(format: ContainerFormat, input: Uint8Array | ParsedImage, options: { withManifestStore?: boolean } = {}): string {
  const hash = createHash('sha256');
  hash.update(`${DIGEST_DOMAIN} ${format.name}\n`);
  const length = Buffer.alloc(8);
  for (const slice of input instanceof Uint8Array ? format.contentOutsideXmp(input) : input.contentOutsideXmp()) {
    if (!options.withManifestStore && isManifestStoreSlice(format.name, slice)) continue;
    length.writeBigUInt64BE(BigInt(slice.length));
    hash.update(length);
    hash.update(slice);
  }
  return `sha256:${hash.digest('hex')}`;
}
