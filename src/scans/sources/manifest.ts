/**
 * A dataset manifest as a scan source (docs/scans.md, "Sources"): image URLs as plain text (one a line,
 * `#` comments), CSV or TSV with a `url` column (img2dataset's and LAION's layout; csv-parse), JSONL with
 * a `url` field, or Parquet with a `url` column (hyparquet, read row group by row group from a copy in
 * the scan's folder). The format is told by the name, then the Content-Type, then the first bytes
 * (`PAR1`). Lines are read as they arrive: a list of any length is never held whole. URLs relative to the
 * manifest resolve against it; anything but http(s) is passed over with a reason.
 */
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parse as parseCsv } from 'csv-parse';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { ScanError, type Candidate, type OpenedSource, type ScanContext } from '../types.js';
import { candidateOf } from './page.js';
import { peek } from './peek.js';

export interface ManifestBody {
  body: Readable;
  contentType?: string;
  name: string;
}

type Format = 'text' | 'csv' | 'tsv' | 'jsonl' | 'parquet';

const URL_COLUMNS = ['url', 'URL', 'image_url', 'Url'];

function formatOf(name: string, contentType: string | undefined, head: Buffer): Format {
  const n = name.toLowerCase().replace(/[?#].*$/, '');
  if (head.subarray(0, 4).toString('latin1') === 'PAR1' || n.endsWith('.parquet')) return 'parquet';
  if (n.endsWith('.jsonl') || n.endsWith('.ndjson')) return 'jsonl';
  if (n.endsWith('.tsv')) return 'tsv';
  if (n.endsWith('.csv')) return 'csv';
  const t = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (t === 'text/csv') return 'csv';
  if (t === 'text/tab-separated-values') return 'tsv';
  if (t === 'application/jsonl' || t === 'application/x-ndjson' || t === 'application/jsonlines') return 'jsonl';
  const first = head.toString('utf8').trimStart();
  if (first.startsWith('{')) return 'jsonl';
  return 'text';
}

/** Every URL of the manifest, in order, as written. */
async function* urlsOf(m: ManifestBody, ctx: ScanContext): AsyncGenerator<string> {
  const { head, stream } = await peek(m.body, 8);
  const format = formatOf(m.name, m.contentType, head);
  if (format === 'parquet') {
    yield* parquetUrls(stream, ctx);
    return;
  }
  if (format === 'csv' || format === 'tsv') {
    const rows = stream.pipe(
      parseCsv({ delimiter: format === 'tsv' ? '\t' : ',', columns: true, relax_column_count: true, skip_empty_lines: true, bom: true }),
    );
    let column: string | undefined;
    for await (const row of rows as AsyncIterable<Record<string, string>>) {
      column ??= URL_COLUMNS.find((c) => c in row);
      if (column === undefined) throw new ScanError('invalid_source', `${m.name}: no url column (looked for ${URL_COLUMNS.join(', ')})`);
      const u = row[column];
      if (u) yield u;
    }
    return;
  }
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (format === 'jsonl') {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        ctx.skipped(m.name, 'unreadable', `a JSONL line that is not JSON: ${line.slice(0, 80)}`);
        continue;
      }
      const u = typeof v === 'object' && v !== null ? URL_COLUMNS.map((c) => (v as Record<string, unknown>)[c]).find((x) => typeof x === 'string') : undefined;
      if (typeof u === 'string') yield u;
      continue;
    }
    yield line;
  }
}

/** A Parquet manifest: copied to the scan's folder, then its url column read one row group at a time. */
async function* parquetUrls(body: Readable, ctx: ScanContext): AsyncGenerator<string> {
  const path = join(ctx.folder, `manifest-${process.hrtime.bigint()}.parquet`);
  await pipeline(body, createWriteStream(path, { mode: 0o600 }));
  let file: Awaited<ReturnType<typeof asyncBufferFromFile>>;
  let meta: Awaited<ReturnType<typeof parquetMetadataAsync>>;
  try {
    file = await asyncBufferFromFile(path);
    meta = await parquetMetadataAsync(file);
  } catch (err) {
    throw new ScanError('invalid_source', `not a Parquet file: ${(err as Error).message}`);
  }
  const names = meta.schema.map((s) => s.name);
  const column = URL_COLUMNS.find((c) => names.includes(c));
  if (!column) throw new ScanError('invalid_source', `the Parquet manifest has no url column (looked for ${URL_COLUMNS.join(', ')})`);
  let rowStart = 0;
  for (const group of meta.row_groups) {
    const rowEnd = rowStart + Number(group.num_rows);
    const rows = (await parquetReadObjects({ file, metadata: meta, columns: [column], rowStart, rowEnd })) as Record<string, unknown>[];
    for (const r of rows) if (typeof r[column] === 'string') yield r[column] as string;
    rowStart = rowEnd;
  }
}

export function manifestSource(open: () => Promise<ManifestBody>, location: string, ctx: ScanContext): OpenedSource {
  return {
    kind: 'manifest',
    async *candidates(from: number): AsyncGenerator<Candidate> {
      const m = await open();
      let index = 0;
      for await (const raw of urlsOf(m, ctx)) {
        let url: URL;
        try {
          url = new URL(raw, /^[a-z][a-z0-9+.-]*:/i.test(location) ? location : undefined);
        } catch {
          ctx.skipped(raw.slice(0, 200), 'invalid_source', 'not a URL');
          continue;
        }
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
          ctx.skipped(url.href.slice(0, 200), 'invalid_source', `${url.protocol} URLs in a manifest are not fetched`);
          continue;
        }
        const i = index++;
        if (i < from) continue;
        yield candidateOf(i, { url: url.href, meta: [] }, ctx);
      }
    },
    async close() {},
  };
}
