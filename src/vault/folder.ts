/**
 * The folder backend: `<dataDir>/vault/<2 hex>/<32 hex>`. A put writes a temporary file in the same
 * folder, fsyncs it, renames it into place and fsyncs the folder, so an object is whole or absent after
 * a crash; leftover temporary files (a process killed mid-write) are removed by the reconciler's list.
 */
import { createReadStream } from 'node:fs';
import { once } from 'node:events';
import { mkdir, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isErrno } from '../secrets/files.js';
import { SEGMENT_READ_BYTES } from './crypto.js';
import { isObjectKey, type StoredObject, VaultMissingError, type VaultStorage } from './storage.js';

const TMP = /\.tmp-[0-9a-f]+$/;

export class FolderStorage implements VaultStorage {
  readonly kind = 'file';
  readonly #root: string;

  constructor(root: string) {
    this.#root = root;
  }

  #path(key: string): string {
    if (!isObjectKey(key.replace(TMP, ''))) throw new Error(`not a vault object key: ${JSON.stringify(key)}`);
    return join(this.#root, key);
  }

  async put(key: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const path = this.#path(key);
    const dir = join(this.#root, key.slice(0, 2));
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = `${path}.tmp-${process.pid.toString(16)}${Date.now().toString(16)}`;
    const fh = await open(tmp, 'wx', 0o600);
    let bytes = 0;
    try {
      for await (const chunk of chunks) {
        let off = 0;
        while (off < chunk.length) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.length - off);
          off += bytesWritten;
        }
        bytes += chunk.length;
      }
      await fh.sync();
      await fh.close();
      await rename(tmp, path);
    } catch (err) {
      await fh.close().catch(() => undefined);
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
    return bytes;
  }

  async get(key: string, from = 0, to = Number.MAX_SAFE_INTEGER): Promise<AsyncIterable<Uint8Array>> {
    const path = this.#path(key);
    // Opened before answering, so that a missing object is an error here, not mid-stream.
    const stream = createReadStream(path, { start: from, end: to, highWaterMark: SEGMENT_READ_BYTES });
    try {
      await once(stream, 'ready');
    } catch (err) {
      stream.destroy();
      if (isErrno(err, 'ENOENT')) throw new VaultMissingError(`vault object ${key} is missing from storage`);
      throw err;
    }
    return stream;
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    try {
      const s = await stat(this.#path(key));
      return { key, bytes: s.size, modifiedAt: s.mtime };
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.#path(key), { force: true });
  }

  async *list(): AsyncIterable<StoredObject> {
    let dirs: string[];
    try {
      dirs = await readdir(this.#root);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw err;
    }
    for (const d of dirs) {
      if (!/^[0-9a-f]{2}$/.test(d)) continue;
      for (const name of await readdir(join(this.#root, d)).catch(() => [] as string[])) {
        const key = `${d}/${name}`;
        if (!isObjectKey(key.replace(TMP, ''))) continue;
        const s = await stat(join(this.#root, key)).catch(() => undefined);
        // A temporary file (a write cut short) is listed under its own name, which no row names: the
        // reconciler removes it once it is older than its grace period.
        if (s?.isFile()) yield { key, bytes: s.size, modifiedAt: s.mtime };
      }
    }
  }
}
