/**
 * C2PA manifest-store mutations for the fuzz suite (issue #37): one seeded mutation of a file's store, in
 * its JUMBF boxes, its CBOR, the COSE claim signature or the X.509 DER of its certificate chain, every
 * enclosing length recomputed (or deliberately overridden), and the property every answer must have.
 * The tree model and the container re-framing are the repro folder's (../shared/repro/c2pa: jumbf.mjs,
 * model.mjs, trees.mjs), read in place like the corpus.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { prng } from '../../bench/load/random.js';
import type { C2paContainer } from '../../src/c2pa/detect.js';
import type { SignerIdentity } from '../../src/c2pa/identity.js';
import { c2paMemoryBytes } from '../../src/c2pa/reader.js';
import { STATUS_OF } from '../../src/http/errors.js';
import { noLayers } from '../../src/pipeline/layers.js';
import { protectWithCredentials } from '../../src/pipeline/credentials.js';
import { verifyReport } from '../../src/pipeline/verify.js';
import { read } from './c2pa.js';

export const SHARED = join(import.meta.dirname, '..', '..', '..', 'shared');
export const REPRO = join(SHARED, 'repro', 'c2pa');
export const haveFuzzModel = existsSync(join(REPRO, 'model.mjs')) && existsSync(join(REPRO, 'trees.mjs'));

/** A node of the repro helpers' untyped JavaScript trees. */
type Node = any;
interface Model {
  getStore(fmt: string, b: Buffer): Buffer;
  withStore(fmt: string, b: Buffer, store: Buffer): Buffer;
  parseStore(b: Buffer): Node[];
  enrich(boxes: Node[]): Node[];
  serStore(boxes: Node[]): Buffer;
  allBoxes(boxes: Node[]): { b: Node; parent: Node; siblings: Node[] }[];
  cborNodes(n: Node): { n: Node; parent: Node }[];
  derNodes(n: Node): { n: Node; parent: Node }[];
}

let model: Promise<Model> | undefined;
/** The repro folder's helpers, loaded once. */
export function loadModel(): Promise<Model> {
  model ??= (async () => ({
    ...(await import(join(REPRO, 'jumbf.mjs'))),
    ...(await import(join(REPRO, 'model.mjs'))),
    ...(await import(join(REPRO, 'trees.mjs'))),
  }))();
  return model;
}

export const MUTATIONS = [
  'jumbf-length',
  'jumbf-type',
  'jumbf-drop',
  'cbor-length',
  'cbor-retype',
  'cbor-nest',
  'cose-header',
  'der-length',
  'der-nest',
  'der-bytes',
] as const;
export type Mutation = (typeof MUTATIONS)[number];

const HUGE = [0x7fffffff, 0xffffffff, 2 ** 30, 1 << 20, 65_536];
/** A length off by a little or by a lot. */
const badLength = (rnd: () => number, real: number): number =>
  rnd() < 0.5 ? HUGE[Math.floor(rnd() * HUGE.length)]! : Math.max(0, real + Math.floor(rnd() * 17) - 8);
const pick = <T>(rnd: () => number, xs: readonly T[]): T | undefined => (xs.length === 0 ? undefined : xs[Math.floor(rnd() * xs.length)]);

/** A DER SEQUENCE around `inner`, with a definite length. */
function derSequence(inner: Buffer): Buffer {
  const n = inner.length;
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([0x30, ...len]), inner]);
}

/** Every DER tree inside the store's CBOR (x5chain certificates, timestamp tokens). */
function derTrees(m: Model, boxes: Node[]): Node[] {
  const out: Node[] = [];
  const visit = (n: Node): void => {
    for (const { n: x } of m.cborNodes(n)) {
      if (x.t === 'bstr' && x.inner?.kind === 'der') out.push(x.inner.tree);
      if (x.t === 'bstr' && x.inner?.kind === 'cbor') visit(x.inner.tree);
    }
  };
  for (const { b } of m.allBoxes(boxes)) if (b.cbor) visit(b.cbor);
  return out;
}

/**
 * `file` with one `kind` mutation of its manifest store drawn from `seed`, or undefined when the store
 * has nothing of that kind (a store without certificates for a DER mutation).
 */
export async function mutate(format: C2paContainer, file: Buffer, kind: Mutation, seed: number): Promise<Buffer | undefined> {
  const m = await loadModel();
  const rnd = prng(seed);
  const tree = m.enrich(m.parseStore(m.getStore(format, file)));
  const boxes = m.allBoxes(tree);
  const cborBoxes = boxes.filter((x) => x.b.cbor).map((x) => x.b);
  switch (kind) {
    case 'jumbf-length': {
      const b = pick(rnd, boxes)?.b;
      if (!b || b.tbox === 'RAW!') return undefined;
      b.lenOverride = badLength(rnd, (b.data?.length ?? 0) + 8);
      break;
    }
    case 'jumbf-type': {
      const b = pick(rnd, boxes)?.b;
      if (!b || b.tbox === 'RAW!') return undefined;
      b.tboxOverride = pick(rnd, ['jumb', 'jumd', 'cbor', 'json', 'bidb', '\0\0\0\0', 'c2pa']);
      break;
    }
    case 'jumbf-drop': {
      const x = pick(
        rnd,
        boxes.filter((y) => y.siblings.length > 1),
      );
      if (!x) return undefined;
      x.siblings.splice(x.siblings.indexOf(x.b), 1);
      break;
    }
    case 'cbor-length':
    case 'cbor-retype':
    case 'cbor-nest': {
      const box = pick(rnd, cborBoxes);
      if (!box) return undefined;
      const nodes = m.cborNodes(box.cbor).map((x) => x.n);
      const n = pick(rnd, kind === 'cbor-length' ? nodes.filter((y: Node) => ['bstr', 'tstr', 'arr', 'map'].includes(y.t)) : nodes);
      if (!n) return undefined;
      if (kind === 'cbor-length') {
        n.lenOverride = badLength(rnd, n.t === 'arr' || n.t === 'map' ? n.items.length : n.v.length);
        n.w = 4;
      } else if (kind === 'cbor-retype') {
        const raws = [
          [0xf6],
          [0xf7],
          [0x7f, 0x61, 0x61, 0xff],
          [0x9f, 0x01],
          [0x5f, 0x41, 0x00, 0xff],
          [0xc0, 0x01],
          [0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ];
        Object.assign(n, { t: 'raw', v: Buffer.from(pick(rnd, raws)!), rawOverride: undefined, inner: undefined });
      } else {
        const depth = 8 + Math.floor(rnd() * 200);
        Object.assign(n, { t: 'raw', v: Buffer.concat([Buffer.alloc(depth, 0x81), Buffer.from([0x01])]), inner: undefined });
      }
      break;
    }
    case 'cose-header': {
      const sig = cborBoxes.find((b) => /signature/.test(b.label ?? ''));
      const root = sig?.cbor?.t === 'tag' ? sig.cbor.item : sig?.cbor;
      const prot = root?.items?.[0];
      if (!prot?.inner?.tree) return undefined;
      const n = pick(
        rnd,
        m.cborNodes(prot.inner.tree).map((x) => x.n),
      );
      if (!n) return undefined;
      if (rnd() < 0.5 && ['bstr', 'tstr', 'arr', 'map'].includes(n.t)) {
        n.lenOverride = badLength(rnd, n.t === 'arr' || n.t === 'map' ? n.items.length : n.v.length);
        n.w = 4;
      } else Object.assign(n, { t: 'raw', v: Buffer.from([0xf6]), inner: undefined });
      break;
    }
    case 'der-length':
    case 'der-nest':
    case 'der-bytes': {
      const t = pick(rnd, derTrees(m, tree));
      if (!t) return undefined;
      const n = pick(
        rnd,
        m.derNodes(t).map((x) => x.n),
      );
      if (!n) return undefined;
      if (kind === 'der-length') n.lenOverride = badLength(rnd, 0);
      else if (kind === 'der-nest') {
        let nested = Buffer.from([0x02, 0x01, 0x01]);
        for (let i = 8 + Math.floor(rnd() * 64); i > 0; i--) nested = derSequence(nested);
        n.rawOverride = nested;
      } else if (n.content?.length) {
        n.content = Buffer.from(n.content);
        n.content[Math.floor(rnd() * n.content.length)] ^= 1 << Math.floor(rnd() * 8);
      } else return undefined;
      break;
    }
  }
  return m.withStore(format, file, m.serStore(tree));
}

export type FuzzOutcome = 'refused' | 'updated' | 'parent-invalid' | 'unverified' | 'invalidated' | 'unchanged' | 'none';

/** The code of an OptmarkError that the API answers with a 4xx, else a failure of the property. */
function refusal(err: unknown, what: string): string {
  const code = (err as { code?: string } | undefined)?.code;
  const status = code === undefined ? undefined : STATUS_OF[code as keyof typeof STATUS_OF];
  expect(status, `${what} threw ${String((err as Error)?.stack ?? err).slice(0, 400)}`).toBeDefined();
  expect(status!, `${what}: ${code}`).toBeLessThan(500);
  return code!;
}

/**
 * The property of one mutated file: protect (OPTMARK_C2PA=update) and verify answer or refuse with a 4xx
 * code, never throw anything else; `updated` only of an output the reference reader and verify find
 * valid; the reader's wasm memory stays under `memoryCapBytes`. Returns what protect did.
 */
export async function checkMutated(input: Buffer, identity: SignerIdentity, memoryCapBytes: number): Promise<{ protect: FuzzOutcome; verify: string }> {
  let verify: string;
  try {
    const r = await verifyReport(new Uint8Array(input), noLayers);
    verify = r.c2pa.present ? (r.c2pa.valid ? 'valid' : 'invalid') : 'absent';
  } catch (err) {
    verify = refusal(err, 'verify');
  }
  let protect: FuzzOutcome;
  try {
    const out = await protectWithCredentials(new Uint8Array(input), {}, { mode: 'update', identity: async () => identity });
    protect = out.outcome;
    const bytes = Buffer.concat(out.pieces);
    if (out.outcome === 'updated') {
      const format = (['jpeg', 'png', 'webp'] as const).find((f) => out.mimeType.endsWith(f))!;
      expect((await read(format, bytes)).validation_state, 'an updated output the reader does not validate').toMatch(/^(Valid|Trusted)$/);
      expect((await verifyReport(bytes, noLayers)).c2pa.valid, 'an updated output verify does not validate').toBe(true);
    }
    for (const w of out.warnings) if (out.outcome !== 'updated') expect(w.message).not.toMatch(/were kept|stay valid/);
  } catch (err) {
    refusal(err, 'protect');
    protect = 'refused';
  }
  expect(c2paMemoryBytes(), "the reader's wasm memory").toBeLessThan(memoryCapBytes);
  return { protect, verify };
}

export interface FuzzSeedFile {
  name: string;
  format: C2paContainer;
  bytes: Buffer;
}

/** The seed files: the corpus's C2PA files (when present) and PNG, WebP and JPEG files signed by a test camera. */
export async function fuzzSeeds(): Promise<FuzzSeedFile[]> {
  const { readFileSync } = await import('node:fs');
  const { withCredentials } = await import('./c2pa.js');
  const { smallImage } = await import('./images.js');
  const corpus = ['c2pa_CA.jpg', 'c2pa_C_with_CAWG_data.jpg'].filter((name) => existsSync(join(SHARED, 'corpus', name)));
  return [
    ...corpus.map((name) => ({ name, format: 'jpeg' as const, bytes: readFileSync(join(SHARED, 'corpus', name)) })),
    ...(await Promise.all(
      (['png', 'webp', 'jpeg'] as const).map(async (format) => ({
        name: `signed.${format}`,
        format,
        bytes: Buffer.from(await withCredentials(format, await smallImage(format))),
      })),
    )),
  ];
}

/**
 * `runs` mutations of each kind on each seed file, checked (checkMutated); the number of cases run and
 * the tally of `kind outcome`.
 */
export async function runMutations(
  seeds: FuzzSeedFile[],
  identity: SignerIdentity,
  runs: number,
  seed: number,
): Promise<{ ran: number; tally: Map<string, number> }> {
  const tally = new Map<string, number>();
  let ran = 0;
  for (const kind of MUTATIONS) {
    for (const [i, file] of seeds.entries()) {
      for (let r = 0; r < runs; r++) {
        const input = await mutate(file.format, file.bytes, kind, seed * 1_000_003 + i * 1009 + r * 31 + MUTATIONS.indexOf(kind));
        if (!input) continue;
        const got = await checkMutated(input, identity, 256 * 1024 * 1024);
        ran++;
        const key = `${kind} ${got.protect}`;
        tally.set(key, (tally.get(key) ?? 0) + 1);
      }
    }
  }
  return { ran, tally };
}
