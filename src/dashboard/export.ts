/** The history export: records as CSV (RFC 4180) or JSON. */
import type { MarkRecord } from '../store/index.js';

const COLUMNS: ReadonlyArray<[string, (r: MarkRecord) => string | number | null]> = [
  ['marked_at', (r) => r.markedAt],
  ['original_name', (r) => r.originalName],
  ['produced_name', (r) => r.producedName],
  ['mime_type', (r) => r.mimeType],
  ['bytes', (r) => r.bytes],
  ['sha256', (r) => r.sha256],
  ['layers', (r) => r.layers.join(' ')],
  ['key_prefix', (r) => r.keyPrefix],
  ['provenance_key_id', (r) => r.provenanceKeyId],
  ['batch_id', (r) => r.batchId],
  ['record_id', (r) => r.id],
];

/**
 * One CSV field: quoted when it holds a comma, quote or line break, and prefixed with ' when it starts
 * with = + - @ (or tab/CR), so a spreadsheet opening the export does not run a file name as a formula.
 */
export function csvField(value: string | number | null): string {
  if (value === null) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function recordsCsv(records: readonly MarkRecord[]): string {
  const lines = [COLUMNS.map(([name]) => name).join(',')];
  for (const r of records) lines.push(COLUMNS.map(([, get]) => csvField(get(r))).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

export function recordsJson(records: readonly MarkRecord[]): string {
  return `${JSON.stringify({ records }, null, 1)}\n`;
}
