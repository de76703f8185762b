/**
 * The one writer of key and secret files (src/secrets/files.ts): atomic (no temporary file left, a
 * reader never sees half a file), 0600 whatever was there before, `create` never replaces, and racing
 * creators all get the value that was linked first.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadFingerprintSecret } from '../src/fingerprint/secret.js';
import { loadOrCreateKeyFile, PUBLIC_FILE_MODE, readKeyFile, writeKeyFile } from '../src/secrets/files.js';

const root = mkdtempSync(join(tmpdir(), 'optmark-secrets-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const tooLarge = (size: number) => new Error(`too large: ${size}`);

describe('writeKeyFile', () => {
  it('creates the directory 0700 and the file 0600; create never replaces, replace does (and tightens the mode)', async () => {
    const dir = join(root, 'a', 'b');
    const file = join(dir, 'k.pem');
    expect(await writeKeyFile(file, 'one')).toBe(true);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await writeKeyFile(file, 'two')).toBe(false);
    expect(readFileSync(file, 'utf8')).toBe('one');
    chmodSync(file, 0o644);
    expect(await writeKeyFile(file, 'three', { how: 'replace' })).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('three');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await writeKeyFile(join(dir, 'p.pem'), 'public', { mode: PUBLIC_FILE_MODE })).toBe(true);
    expect(statSync(join(dir, 'p.pem')).mode & 0o777).toBe(0o644);
    expect(readdirSync(dir).sort()).toEqual(['k.pem', 'p.pem']);
  });

  it('readKeyFile: undefined when missing, refuses a file over the bound unread and names a directory', async () => {
    const dir = join(root, 'r');
    await writeKeyFile(join(dir, 'big'), Buffer.alloc(100));
    expect(await readKeyFile(join(dir, 'none'), 10, tooLarge)).toBeUndefined();
    await expect(readKeyFile(join(dir, 'big'), 10, tooLarge)).rejects.toThrow('too large: 100');
    await expect(readKeyFile(dir, 10, tooLarge)).rejects.toMatchObject({ code: 'EISDIR', message: `${dir} is a directory, not a file` });
  });
});

describe('loadOrCreateKeyFile', () => {
  it('twenty racing creators all get the one value linked first, and no temporary file is left', async () => {
    const dir = join(root, 'race');
    const file = join(dir, 'secret');
    let made = 0;
    const values = await Promise.all(
      Array.from({ length: 20 }, () =>
        loadOrCreateKeyFile(file, {
          max: 64,
          tooLarge,
          parse: (b) => b.toString('hex'),
          make: async () => {
            const bytes = Buffer.from([made++, 1, 2, 3]);
            return { value: bytes.toString('hex'), bytes };
          },
        }),
      ),
    );
    expect(new Set(values).size).toBe(1);
    expect(values[0]).toBe(readFileSync(file).toString('hex'));
    expect(readdirSync(dir)).toEqual(['secret']);
  });

  it('the fingerprint secret: created 0600 once, a short file refused, a named file never created', async () => {
    const dataDir = join(root, 'fp');
    const a = await loadFingerprintSecret({ dataDir });
    expect(a).toHaveLength(32);
    expect(statSync(join(dataDir, 'fingerprint.key')).mode & 0o777).toBe(0o600);
    expect(Buffer.from(await loadFingerprintSecret({ dataDir })).equals(Buffer.from(a))).toBe(true);
    writeFileSync(join(dataDir, 'short.key'), 'abc');
    await expect(loadFingerprintSecret({ dataDir, file: join(dataDir, 'short.key') })).rejects.toThrow('too short (3 bytes, need at least 16)');
    await expect(loadFingerprintSecret({ dataDir, file: join(dataDir, 'none.key') })).rejects.toThrow('does not exist');
    expect(readdirSync(dataDir).sort()).toEqual(['fingerprint.key', 'short.key']);
  });
});
