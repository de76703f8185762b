/**
 * A real S3 API server for the tests: s3rver 3.7.1 in a child process of its own on 127.0.0.1
 * (./s3-server-child.cjs), its objects in a temporary folder. What it needs that no product code should:
 *   - `node --openssl-legacy-provider`: s3rver makes ListObjectsV2 continuation tokens with DES, which
 *     Node 20's OpenSSL 3 only offers through the legacy provider (without it a second page fails);
 *   - the child's fix of its putObject answering before the object's file is written (see the child).
 * The product's client computes checksums only WHEN_REQUIRED (src/vault/s3.ts), right for every S3; so
 * does this helper's client, since s3rver stores the `aws-chunked` framing the SDK otherwise sends for a
 * streamed body as the object itself (a Buffer body, as both send, gets a plain CRC32 header instead).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { S3Storage } from '../../src/vault/s3.js';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 's3-server-child.cjs');

/** s3rver's one account. */
export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export class S3TestServer {
  private constructor(
    readonly proc: ChildProcess,
    readonly directory: string,
    readonly endpoint: string,
    readonly client: S3Client,
  ) {}

  /** Starts the server with `buckets` made; resolves once it listens. */
  static async start(buckets: string[]): Promise<S3TestServer> {
    const directory = mkdtempSync(join(tmpdir(), 'optmark-s3-'));
    const proc = spawn(process.execPath, ['--openssl-legacy-provider', CHILD, directory, ...buckets], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const port = await new Promise<number>((resolve, reject) => {
      proc.stdout!.setEncoding('utf8').on('data', (s: string) => {
        output += s;
        const m = /\{"port":(\d+)\}/.exec(output);
        if (m) resolve(Number(m[1]));
      });
      proc.stderr!.setEncoding('utf8').on('data', (s: string) => (output += s));
      proc.on('exit', (code) => reject(new Error(`s3rver exited (${code}) before listening: ${output}`)));
    });
    const endpoint = `http://127.0.0.1:${port}`;
    const client = new S3Client({
      region: 'us-east-1',
      endpoint,
      forcePathStyle: true,
      credentials: S3_CREDENTIALS,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    return new S3TestServer(proc, directory, endpoint, client);
  }

  /** The vault's backend on `bucket`/`prefix` of this server, as openVault makes it (plus the tests' credentials). */
  storage(bucket: string, prefix: string, pageSize?: number): S3Storage {
    return new S3Storage({ bucket, prefix, endpoint: this.endpoint, region: 'us-east-1', pageSize, client: { credentials: S3_CREDENTIALS } });
  }

  /** Every object name in `bucket` (all pages). */
  async names(bucket: string): Promise<string[]> {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
      for (const o of page.Contents ?? []) out.push(o.Key!);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out.sort();
  }

  async read(bucket: string, name: string): Promise<Buffer> {
    const r = await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: name }));
    return Buffer.from(await r.Body!.transformToByteArray());
  }

  async write(bucket: string, name: string, bytes: Uint8Array): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: bucket, Key: name, Body: bytes, ContentLength: bytes.length }));
  }

  async stop(): Promise<void> {
    this.client.destroy();
    if (this.proc.exitCode === null) {
      const gone = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGTERM');
      await gone;
    }
    rmSync(this.directory, { recursive: true, force: true });
  }
}
