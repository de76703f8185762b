/**
 * The protect response body (SHA-256 + base64 + JSON bytes) beside its floor: our `protectBody` on the
 * pieces protect really produces (and on the whole file), the floor exactly as the capacity check
 * computes it (bench/load/floor.ts, the same formula the acceptance check uses), and the naive server's
 * JSON.stringify of a base64 string plus its UTF-8 encoding. Inputs: the load test's generated 1 MP and
 * 12 MP JPEGs.
 *
 *   npm run build && node dist/bench/body.bench.js        (BENCH_QUICK=1 for a smoke run)
 */
import { compare } from './lib/report.js';
import { generatedCorpus } from './load/corpus.js';
import { floorBody } from './load/floor.js';
import { naiveJson } from './load/naive.js';
import { protect } from '../src/marking/engine.js';
import { protectBody } from '../src/pipeline/body.js';

/** What the naive server builds, as the bytes its res.end(string) writes. */
const naiveBody = (b: Buffer): Buffer => Buffer.from(naiveJson(b), 'utf8');

const corpus = await generatedCorpus(['jpeg-1mp', 'jpeg-12mp']);
for (const img of corpus) {
  const produced = protect(img.bytes);
  const whole = Buffer.from(produced.bytes);
  const fields = { mimeType: produced.mimeType, filename: `photo.${produced.extension}`, signals: produced.signals };
  const ours = protectBody(produced.pieces, fields);
  const floor = floorBody(whole);
  // Same size within the fields the floor leaves out: the comparison is of like with like.
  console.log(
    `\n${img.name}: ${(whole.length / 1e6).toFixed(2)} MB produced in ${produced.pieces.length} pieces; body ${ours.length} bytes (floor body ${floor.length}, naive ${naiveBody(whole).length})`,
  );
  await compare(
    `protect response body, ${img.name} (${(whole.length / 1e6).toFixed(2)} MB)`,
    { name: 'floor: copy + sha256 + base64 + concat', fn: () => floorBody(whole) },
    [
      { name: 'protectBody(pieces) (the worker)', fn: () => protectBody(produced.pieces, fields) },
      { name: 'protectBody(whole file)', fn: () => protectBody(whole, fields) },
      { name: 'naive: JSON.stringify + utf8 bytes', fn: () => naiveBody(whole) },
    ],
    { note: 'Ratios are p50 over the floor. The perf check holds server CPU per protect to 1.3x this floor (issue 7), so the body has to stay near 1.0x.' },
  );
}
