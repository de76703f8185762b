/**
 * `optmark mark` follows OPTMARK_C2PA as the API's protect does (docs/c2pa.md, src/pipeline/credentials.ts):
 * the corpus's two C2PA files, read in place, and PNG, WebP and JPEG files given credentials here, get a
 * valid update manifest (update, the default), a per-file content_credentials_present failure with nothing
 * written and exit status 1 (refuse), or protect's bytes with a warning (invalidate); the report says what
 * happened (`credentials`, `warnings`); files without credentials come out byte for byte as protect makes
 * them in every mode. The same on the layer path (--provenance) and on the quick way's head-only read.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { C2paContainer } from '../src/c2pa/detect.js';
import { protect } from '../src/marking/engine.js';
import { noLayers } from '../src/pipeline/layers.js';
import { verifyReport } from '../src/pipeline/verify.js';
import { expectUpdated, withCredentials } from './helpers/c2pa.js';
import { runBinary, TempDirs } from './helpers/files.js';
import { smallImage } from './helpers/images.js';

const CORPUS = join(import.meta.dirname, '..', '..', 'shared', 'corpus');
const CORPUS_C2PA = ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg'].map((f) => join(CORPUS, f));
const haveCorpus = CORPUS_C2PA.every((f) => existsSync(f));
const temp = new TempDirs('optmark-batch-c2pa-');
afterAll(() => temp.removeAll());

type Line = Record<string, any>;
const FORMATS: C2paContainer[] = ['jpeg', 'png', 'webp'];
const EXT: Record<C2paContainer, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };
/** Files given Content Credentials by another signer, and the same pictures without any. */
let crafted: string;
let plain: string;

beforeAll(async () => {
  const withCc: Record<string, Buffer> = {};
  const without: Record<string, Buffer> = {};
  for (const f of FORMATS) {
    const bytes = await smallImage(f, 480, 320);
    withCc[`cc.${EXT[f]}`] = Buffer.from(await withCredentials(f, bytes));
    without[`plain.${EXT[f]}`] = bytes;
  }
  crafted = temp.folder(withCc);
  plain = temp.folder(without);
}, 60_000);

async function mark(mode: string | undefined, args: string[]): Promise<{ status: number; lines: Map<string, Line>; stdout: string; out: string }> {
  const out = temp.make();
  const env: Record<string, string> = { OPTMARK_DATA_DIR: temp.make('optmark-data-') };
  if (mode !== undefined) env.OPTMARK_C2PA = mode;
  const r = await runBinary(['mark', ...args, '--out', out, '--report', '-'], { env });
  const lines = new Map<string, Line>();
  for (const l of r.stdout.split('\n').filter((x) => x.startsWith('{'))) {
    const line = JSON.parse(l) as Line;
    lines.set(basename(line.input), line);
  }
  return { status: r.status, lines, stdout: r.stdout + r.stderr, out };
}

/** The corpus's two C2PA files, the crafted ones and the plain ones, in one run: its exit status checked. */
async function markAll(mode: string | undefined, status: number): ReturnType<typeof mark> {
  const r = await mark(mode, [...CORPUS_C2PA, crafted, plain]);
  expect(r.status, r.stdout).toBe(status);
  expect(r.lines.size).toBe(8);
  return r;
}

/** True for a file without credentials, after checking its line says so (marked as by protect in every mode). */
function withoutCredentials(name: string, line: Line): boolean {
  if (!name.startsWith('plain.')) return false;
  expect(line, name).toMatchObject({ status: 'done', credentials: 'none', warnings: [] });
  return true;
}

const formatOf = (name: string): C2paContainer => (name.endsWith('.png') ? 'png' : name.endsWith('.webp') ? 'webp' : 'jpeg');

describe('optmark mark and Content Credentials (OPTMARK_C2PA)', () => {
  it.runIf(haveCorpus)(
    'update (the default): every file with credentials gets a valid update manifest; the report says updated, with the warning',
    async () => {
      const r = await markAll(undefined, 0);
      expect(r.stdout).toMatch(/Content Credentials: 5 updated/);
      for (const [name, line] of r.lines) {
        const input = new Uint8Array(readFileSync(line.input));
        const output = new Uint8Array(readFileSync(line.output));
        expect(line.sha256).toBeTypeOf('string');
        if (withoutCredentials(name, line)) {
          expect(Buffer.from(output).equals(Buffer.from(protect(input).bytes))).toBe(true);
          continue;
        }
        expect(line, name).toMatchObject({ status: 'done', changed: true, credentials: 'updated', code: null });
        expect(line.warnings.map((w: { code: string }) => w.code)).toEqual(['content_credentials_updated']);
        await expectUpdated(formatOf(name), input, output);
      }
    },
    180_000,
  );

  it.runIf(haveCorpus)(
    'refuse: a per-file content_credentials_present failure, nothing written for it, exit 1; the other files are marked',
    async () => {
      const r = await markAll('refuse', 1);
      expect(r.stdout).toMatch(/^done 3, skipped 0, failed 5 /m);
      for (const [name, line] of r.lines) {
        if (withoutCredentials(name, line)) continue;
        expect(line, name).toMatchObject({ status: 'failed', code: 'content_credentials_present', bytes: null, sha256: null });
        expect(existsSync(line.output)).toBe(false);
      }
    },
    60_000,
  );

  it.runIf(haveCorpus)(
    "invalidate: protect's bytes, the credentials left as they are (no longer valid), and the warning saying so",
    async () => {
      const r = await markAll('invalidate', 0);
      for (const [name, line] of r.lines) {
        const input = new Uint8Array(readFileSync(line.input));
        const output = readFileSync(line.output);
        expect(output.equals(Buffer.from(protect(input).bytes)), name).toBe(true);
        if (withoutCredentials(name, line)) continue;
        expect(line, name).toMatchObject({ status: 'done', credentials: 'invalidated' });
        expect(line.warnings.map((w: { code: string }) => w.code)).toEqual(['content_credentials_invalidated']);
        const v = await verifyReport(output, noLayers);
        expect(v.c2pa).toMatchObject({ present: true, valid: false });
      }
    },
    120_000,
  );

  it.runIf(haveCorpus)(
    'the layer path (--provenance, --fingerprint): an update manifest over the tagged or re-encoded file, valid; refuse refuses it; a file already marked is left as it is',
    async () => {
      const cc = join(crafted, 'cc.jpg');
      const r = await mark(undefined, ['--provenance', CORPUS_C2PA[0]!, cc]);
      expect(r.status, r.stdout).toBe(0);
      for (const [name, line] of r.lines) {
        expect(line, name).toMatchObject({ status: 'done', credentials: 'updated' });
        const output = new Uint8Array(readFileSync(line.output));
        await expectUpdated('jpeg', new Uint8Array(readFileSync(line.input)), output);
      }
      // The pixel layer re-encodes: the update manifest over the new pixels records c2pa.edited.
      const fingerprinted = await mark(undefined, ['--fingerprint', cc]);
      expect(fingerprinted.status, fingerprinted.stdout).toBe(0);
      const fp = fingerprinted.lines.get('cc.jpg')!;
      expect(fp).toMatchObject({ status: 'done', credentials: 'updated' });
      await expectUpdated('jpeg', new Uint8Array(readFileSync(cc)), new Uint8Array(readFileSync(fp.output)), 'c2pa.edited');
      const refused = await mark('refuse', ['--provenance', cc]);
      expect(refused.status).toBe(1);
      expect(refused.lines.get('cc.jpg')).toMatchObject({ status: 'failed', code: 'content_credentials_present' });
      // Marked once already (update): marking it again keeps it byte for byte, credentials unchanged.
      const again = await mark('refuse', [join(r.out, basename(CORPUS_C2PA[0]!))]);
      expect(again.status).toBe(0);
      const line = [...again.lines.values()][0]!;
      expect(line).toMatchObject({ status: 'done', changed: false, credentials: 'unchanged', warnings: [] });
      expect(readFileSync(line.output).equals(readFileSync(line.input))).toBe(true);
    },
    180_000,
  );
});
