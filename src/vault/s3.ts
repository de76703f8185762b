/**
 * The S3-compatible backend (OPTMARK_VAULT_URL=s3://bucket/prefix): object `<prefix>/<storage key>` in
 * the bucket, many instances sharing one bucket. A put collects the sealed bytes (at most one upload's
 * worth plus the seal's overhead) and writes them with one PutObject, which S3 makes visible whole or not
 * at all. Reads are ranged GETs; the reconciler lists with ListObjectsV2 page by page.
 *
 * Checksums are computed and checked only where an operation requires them (`WHEN_REQUIRED`), the
 * SDKs' behaviour before flexible checksums (SDK 3.729): every S3 implementation accepts that, where
 * several S3-compatible services refused the CRC32 headers (and `aws-chunked` framing for streamed
 * bodies) that newer SDKs send by default. PutObject still carries its Content-Length and SigV4
 * signature, and every sealed segment carries its own authentication tag, so nothing read back is
 * trusted without that.
 */
import { buffer } from 'node:stream/consumers';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { isObjectKey, type StoredObject, VaultMissingError, type VaultStorage } from './storage.js';

export interface S3Location {
  bucket: string;
  /** Without leading or trailing slashes; '' for the bucket's root. */
  prefix: string;
}

export interface S3StorageOptions extends S3Location {
  /** OPTMARK_VAULT_S3_ENDPOINT: an S3-compatible service's address (then path-style requests). */
  endpoint?: string;
  region: string;
  /** Keys per ListObjectsV2 page (S3's maximum and default is 1000). */
  pageSize?: number;
  /** Client settings beside these (the tests' credentials); the SDK's default provider chain otherwise. */
  client?: Partial<S3ClientConfig>;
}

/** `s3://bucket/prefix` → bucket and prefix; throws a message for anything else. */
export function parseS3Url(raw: string): S3Location {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`expected s3://bucket/prefix, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 's3:') throw new Error(`expected an s3:// URL, got ${JSON.stringify(raw)}`);
  const bucket = url.hostname;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket) || bucket.includes('..'))
    throw new Error(`expected a bucket name (3 to 63 of a-z, 0-9, '.', '-') after s3://, got ${JSON.stringify(raw)}`);
  if (url.username || url.password || url.port || url.search || url.hash)
    throw new Error(`expected s3://bucket/prefix with no credentials, port, query or fragment, got ${JSON.stringify(raw)}`);
  const prefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, '');
  return { bucket, prefix };
}

function statusOf(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function nameOf(err: unknown): string | undefined {
  return (err as { name?: string })?.name;
}

export class S3Storage implements VaultStorage {
  readonly kind = 's3';
  readonly client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #pageSize: number | undefined;

  constructor(o: S3StorageOptions) {
    this.#bucket = o.bucket;
    this.#prefix = o.prefix ? `${o.prefix}/` : '';
    this.#pageSize = o.pageSize;
    this.client = new S3Client({
      region: o.region,
      ...(o.endpoint ? { endpoint: o.endpoint, forcePathStyle: true } : {}),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...o.client,
    });
  }

  /** The object's name in the bucket. */
  objectName(key: string): string {
    if (!isObjectKey(key)) throw new Error(`not a vault object key: ${JSON.stringify(key)}`);
    return this.#prefix + key;
  }

  async put(key: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const name = this.objectName(key);
    const body = await buffer(chunks);
    await this.client.send(new PutObjectCommand({ Bucket: this.#bucket, Key: name, Body: body, ContentLength: body.length }));
    return body.length;
  }

  async get(key: string, from = 0, to = Number.MAX_SAFE_INTEGER): Promise<AsyncIterable<Uint8Array>> {
    const name = this.objectName(key);
    const range = to >= Number.MAX_SAFE_INTEGER ? `bytes=${from}-` : `bytes=${from}-${to}`;
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: name, Range: range }));
      if (!r.Body) throw new Error(`S3 answered GET ${name} with no body`);
      return r.Body as AsyncIterable<Uint8Array>;
    } catch (err) {
      if (nameOf(err) === 'NoSuchKey' || statusOf(err) === 404) throw new VaultMissingError(`vault object ${key} is missing from storage`);
      // A range that starts past the end: no bytes, as a file read there gives.
      if (statusOf(err) === 416) return (async function* () {})();
      throw err;
    }
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: this.objectName(key) }));
      return { key, bytes: r.ContentLength ?? 0, modifiedAt: r.LastModified ?? new Date(0) };
    } catch (err) {
      if (nameOf(err) === 'NotFound' || statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    // S3 answers 204 for a key that is not there.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.objectName(key) }));
  }

  async *list(): AsyncIterable<StoredObject> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: this.#prefix || undefined, ContinuationToken: token, MaxKeys: this.#pageSize }),
      );
      for (const o of page.Contents ?? []) {
        if (!o.Key?.startsWith(this.#prefix)) continue;
        const key = o.Key.slice(this.#prefix.length);
        // Anything else under the prefix is not the vault's: left alone.
        if (!isObjectKey(key)) continue;
        yield { key, bytes: o.Size ?? 0, modifiedAt: o.LastModified ?? new Date(0) };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }
}
