/**
 * Robustness table of the fingerprint over ../shared/natural (and any folders given as arguments): embed
 * (version 2) with one key, apply every attack of bench/lib/fingerprint-attacks.ts, detect; then the same
 * attacks on the unmarked originals, each tested with N other keys, for the false-positive count. Prints
 * one table per attack family beside published figures of other marks where the same attack exists.
 * Writes nothing to disk; the photographs are read in place.
 *
 *   npm run build && node dist/bench/fingerprint-robustness.js [folder ...] [--keys N] [--images N]
 *        [--range FIRST:END] [--json FILE] [--engine native|reference] [--only REGEX (attack name or family)] [--dense] [--sweep]
 *        [--mark-key BYTE]
 *   node dist/bench/fingerprint-robustness.js --merge A.json --merge B.json
 * (--dense: add DENSE_ATTACKS (crops at 15 and 9 fixed positions,
 * crop + brightness + JPEG at 15, 12 changes of aspect), each family on its own row; --sweep: instead of the
 * bench's 39, SWEEP_ATTACKS (every kind of point 1 across its range) and, on every 8th photograph of the list
 * (kodim01, kodim09, kodim17), BIG_ATTACKS on the photograph upscaled to 12 MP before marking; --range/--json
 * split a long run over processes, --merge prints the one table of their --json files; --mark-key: the
 * marking secret is 32 bytes of BYTE (default 7), the null keys 100, 101, ... as before.)
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { decodeBase, examinable, probe } from '../src/fingerprint/decode.js';
import { detectOnBase } from '../src/fingerprint/detect.js';
import { embedFingerprint } from '../src/fingerprint/embed.js';
import { type Engine, fingerprintEngine } from '../src/fingerprint/native.js';
import { FPR, FPR_PER_SCHEME } from '../src/fingerprint/params.js';
import { ATTACKS, type Attack, BIG_ATTACKS, DENSE_ATTACKS, png, SWEEP_ATTACKS } from './lib/fingerprint-attacks.js';
import { prng } from './load/random.js';

sharp.concurrency(1);

/** dist/bench/ -> repo root -> ../shared/natural */
const NATURAL = fileURLToPath(new URL('../../../shared/natural', import.meta.url));

/**
 * Published figures for the same attack family (sources in the notes printed under the table):
 * [1] Stable Signature (Fernandez et al., ICCV 2023), abstract: crops keeping 10% of the image detected
 *     over 90% at FPR < 1e-6. [2] TrustMark (Bui et al. 2023): W-Bench raw data (VINE, ICLR 2025,
 *     Shilin-LU/VINE@d72f11a data_release), TrustMark_C TPR@0.1%FPR at 512 px; FAQ.md of adobe/trustmark@0227423.
 * [3] invisible-watermark dwtDct (ShieldMnt/invisible-watermark@68d0376 README; W-Bench raw data).
 */
const PUBLISHED: Record<string, string> = {
  jpeg: 'SS: JPEG 50 hardest case [1]; TM_C q25/40 TPR 1.00 [2]; dwtDct q<=70 TPR <= 0.002 [3]',
  jpeg10: 'TM_C q10 TPR 0.977 (512 px), 0.543 (orig. size) [2]; dwtDct 0 [3]',
  resize: 'TM works to ~150 px short side [2]; dwtDct fails resize 0.5 [3]',
  filter: 'TM_C blur k9 TPR 0.45 [2]; dwtDct blur k3 TPR 0 [3]',
  colour: 'dwtDct brightness 1.2 TPR 0.757 [3]',
  crop: 'SS crop to 10%: >90% at FPR<1e-6 [1]; TM ~20% area removed [2]; dwtDct fails [3]',
  rotate: 'dwtDct fails rotate 30 deg [3]',
};

interface Verdict {
  present: boolean;
  scheme: number;
  confidence: number;
  z: number;
}

/** Decodes once, then tests every key on the same pixels (the null trials differ only by key). */
async function detectMany(buf: Buffer, secrets: Uint8Array[], engine: Engine): Promise<Verdict[]> {
  const head = await probe(buf);
  if (!head || !examinable(head.width, head.height)) return secrets.map(() => ({ present: false, scheme: 0, confidence: 0, z: 0 }));
  const base = await decodeBase(buf, head.width, head.height);
  return secrets.map((secret) => {
    const r = detectOnBase(base, head, secret, engine)!; // no deadline: always a result
    return { present: r.present, scheme: r.scheme, confidence: r.confidence, z: r.z };
  });
}

async function psnr(a: Buffer, b: Buffer): Promise<number> {
  const [x, y] = await Promise.all([a, b].map((v) => sharp(v).removeAlpha().raw().toBuffer()));
  let se = 0;
  for (let i = 0; i < x!.length; i++) {
    const d = x![i]! - y![i]!;
    se += d * d;
  }
  const mse = se / x!.length;
  return mse === 0 ? 99 : 10 * Math.log10((255 * 255) / mse);
}

interface Row {
  attacks: Set<string>;
  hits: number;
  n: number;
  conf: number[];
  z: number[];
  nullTrials: number;
  fps: number;
  misses: string[];
}

interface Report {
  rows: Map<string, Row>;
  psnrs: number[];
  embedMsPerMp: number[];
  files: number;
  attacks: number;
  keys: number;
  engine: Engine;
  seconds: number;
}

/** Prints the table (per attack family) with the published figures beside it. */
function report(r0: Report): void {
  const { rows, psnrs, embedMsPerMp, keys, engine } = r0;
  const pad = (s: string | number, n: number): string => String(s).padStart(n);
  const mean = (a: number[]): number => a.reduce((x, y) => x + y, 0) / Math.max(1, a.length);
  const out = [
    '',
    `fingerprint v2 marks, both cores on ${engine}; ${r0.files} images, ${r0.attacks} attacks, ${keys} null keys per unmarked attacked image;`,
    `decision: each scheme at p <= ${FPR_PER_SCHEME} (v2 and v1 both tested, union bound ${FPR})`,
    `${'family'.padEnd(11)} ${pad('detected', 9)} ${pad('rate', 6)} ${pad('mean ratio', 10)} ${pad('min z', 6)} ${pad('FP/trials', 10)}  published (same attack family)`,
  ];
  let fps = 0;
  let trials = 0;
  for (const [family, r] of rows) {
    fps += r.fps;
    trials += r.nullTrials;
    out.push(
      `${family.padEnd(11)} ${pad(`${r.hits}/${r.n}`, 9)} ${pad((r.hits / r.n).toFixed(3), 6)} ${pad(mean(r.conf).toFixed(3), 10)} ${pad(Math.min(...r.z).toFixed(2), 6)} ${pad(`${r.fps}/${r.nullTrials}`, 10)}  ${PUBLISHED[family] ?? '-'}`,
    );
  }
  out.push(`minimum PSNR (RGB) ${Math.min(...psnrs).toFixed(2)} dB over ${psnrs.length} images (mean ${mean(psnrs).toFixed(2)})`);
  out.push(`false positives: ${fps} of ${trials} unmarked trials (every attack, ${keys} keys)`);
  out.push(`embedding: median ${embedMsPerMp.sort((a, b) => a - b)[embedMsPerMp.length >> 1]!.toFixed(0)} ms per megapixel (decode + mark + encode, PNG)`);
  out.push(`families: ${[...rows].map(([f, r]) => `${f} = ${[...r.attacks].join(', ')}`).join('; ')}`);
  const missedBy = [...rows].filter(([, r]) => r.misses.length).map(([f, r]) => `${f}: ${r.misses.join(', ')}`);
  if (missedBy.length) out.push(`misses: ${missedBy.join('; ')}`);
  out.push(
    'published: [1] Stable Signature, Fernandez et al., ICCV 2023 (abstract); [2] TrustMark, Bui et al. 2023: W-Bench raw data (VINE, ICLR 2025,',
    '  Shilin-LU/VINE@d72f11a data_release, TrustMark_C, TPR at 0.1% FPR) and adobe/trustmark@0227423 FAQ.md; [3] invisible-watermark dwtDct,',
    '  ShieldMnt/invisible-watermark@68d0376 README and W-Bench raw data. Rotation, flips, aspect, borders and chains: no published figure found.',
  );
  if (r0.seconds) out.push(`elapsed ${r0.seconds.toFixed(0)} s`);
  console.log(out.join('\n'));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let keys = 3;
  let images = Infinity;
  let first = 0;
  let json: string | undefined;
  let only: RegExp | undefined;
  let engine: Engine = fingerprintEngine();
  let dense = false;
  let sweep = false;
  let markByte = 7;
  const folders: string[] = [];
  const merge: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--keys') keys = Number(args[++i]);
    else if (args[i] === '--images') images = Number(args[++i]);
    else if (args[i] === '--range') [first, images] = args[++i]!.split(':').map(Number) as [number, number];
    else if (args[i] === '--json') json = args[++i];
    else if (args[i] === '--only') only = new RegExp(args[++i]!);
    else if (args[i] === '--engine') engine = args[++i] as Engine;
    else if (args[i] === '--dense') dense = true;
    else if (args[i] === '--sweep') sweep = true;
    else if (args[i] === '--merge') merge.push(args[++i]!);
    else if (args[i] === '--mark-key') markByte = Number(args[++i]);
    else folders.push(args[i]!);
  }
  if (merge.length) {
    // One table from the --json files of runs split with --range.
    const rows = new Map<string, Row>();
    const psnrs: number[] = [];
    const embedMsPerMp: number[] = [];
    let nFiles = 0;
    let nAttacks = 0;
    for (const f of merge) {
      const j = JSON.parse(readFileSync(f, 'utf8')) as {
        files: number;
        keys: number;
        psnrs: number[];
        embedMsPerMp: number[];
        rows: Record<string, Omit<Row, 'attacks'> & { attacks: string[] }>;
      };
      nFiles += j.files;
      keys = j.keys;
      psnrs.push(...j.psnrs);
      embedMsPerMp.push(...j.embedMsPerMp);
      for (const [family, r] of Object.entries(j.rows)) {
        const row = rows.get(family) ?? { attacks: new Set(), hits: 0, n: 0, conf: [], z: [], nullTrials: 0, fps: 0, misses: [] };
        rows.set(family, row);
        for (const a of r.attacks) row.attacks.add(a);
        row.hits += r.hits;
        row.n += r.n;
        row.conf.push(...r.conf);
        row.z.push(...r.z);
        row.nullTrials += r.nullTrials;
        row.fps += r.fps;
        row.misses.push(...r.misses);
      }
    }
    for (const r of rows.values()) nAttacks += r.attacks.size;
    report({ rows, psnrs, embedMsPerMp, files: nFiles, attacks: nAttacks, keys, engine, seconds: 0 });
    return;
  }
  if (existsSync(NATURAL)) folders.unshift(NATURAL);
  else console.log(`note: ${NATURAL} is missing; only the folders given on the command line are used.`);
  const files = folders
    .flatMap((d) =>
      readdirSync(d)
        .filter((f) => /\.(png|jpe?g|webp)$/i.test(f))
        .sort()
        .map((f) => join(d, f)),
    )
    .slice(first, images);
  if (!files.length) {
    console.log('no images: pass a folder of PNG/JPEG/WebP photographs.');
    process.exitCode = 1;
    return;
  }
  const pick = (list: Attack[]): Attack[] => list.filter((a) => !only || only.test(a.name) || only.test(a.family));
  const attacks = pick([...(sweep ? SWEEP_ATTACKS : ATTACKS), ...(dense ? DENSE_ATTACKS : [])]);
  const markKey = new Uint8Array(32).fill(markByte);
  const nullKeys = Array.from({ length: keys }, (_, i) => new Uint8Array(32).fill(100 + i));
  const rows = new Map<string, Row>();
  const psnrs: number[] = [];
  const embedMsPerMp: number[] = [];
  const rng = prng(12345);
  const nrng = prng(54321);
  const t0 = performance.now();
  /** Marks one photograph, runs `list` on the marked copy (and on the original with the null keys); prints one line. */
  const run = async (name: string, orig: Buffer, list: Attack[]): Promise<void> => {
    const m = await sharp(orig).metadata();
    const te = performance.now();
    const marked = Buffer.from(await embedFingerprint(orig, markKey, { maxPixels: 100_000_000 }));
    embedMsPerMp.push((performance.now() - te) / ((m.width! * m.height!) / 1e6));
    psnrs.push(await psnr(orig, marked));
    const missed: string[] = [];
    for (const a of list) {
      const row = rows.get(a.family) ?? { attacks: new Set(), hits: 0, n: 0, conf: [], z: [], nullTrials: 0, fps: 0, misses: [] };
      rows.set(a.family, row);
      row.attacks.add(a.name);
      const [v] = await detectMany(await a.fn(marked, rng), [markKey], engine);
      row.n++;
      row.conf.push(v!.confidence);
      row.z.push(v!.z);
      if (v!.present) row.hits++;
      else {
        missed.push(a.name);
        row.misses.push(`${a.name} (${name})`);
      }
      if (keys > 0) {
        for (const u of await detectMany(await a.fn(orig, nrng), nullKeys, engine)) {
          row.nullTrials++;
          if (u.present) {
            row.fps++;
            row.misses.push(`FALSE POSITIVE ${a.name} (${name})`);
          }
        }
      }
    }
    console.log(`${name}: PSNR ${psnrs[psnrs.length - 1]!.toFixed(2)} dB${missed.length ? `  missed: ${missed.join(', ')}` : ''}`);
  };
  for (const [i, file] of files.entries()) {
    const orig = readFileSync(file);
    const name = file
      .split('/')
      .pop()!
      .replace(/\.\w+$/, '');
    await run(name, orig, attacks);
    if (sweep && (first + i) % 8 === 0 && pick(BIG_ATTACKS).length) {
      // Real uploads are large: the photograph upscaled to 12 MP (aspect kept) before it is marked.
      const { width: w, height: h } = await sharp(orig).metadata();
      const k = Math.sqrt(12e6 / (w! * h!));
      await run(`${name}@12MP`, await png(sharp(orig).resize(Math.round(w! * k), Math.round(h! * k))), pick(BIG_ATTACKS));
    }
  }
  report({ rows, psnrs, embedMsPerMp, files: files.length, attacks: attacks.length, keys, engine, seconds: (performance.now() - t0) / 1000 });
  if (json) {
    const rowsOut = Object.fromEntries([...rows].map(([f, r]) => [f, { ...r, attacks: [...r.attacks] }]));
    writeFileSync(json, JSON.stringify({ files: files.length, keys, psnrs, embedMsPerMp, rows: rowsOut }));
  }
}

await main();
