/**
 * What the operator commands (account, key, usage, signing-key) share: opening the store from the
 * configuration, store errors as one line on stderr, plain aligned tables and JSON listings.
 */
import { loadConfig } from '../config.js';
import { StoreError } from '../store/errors.js';
import { openStore, type Store } from '../store/index.js';

/** Work to do with the opened store; returns the exit status. */
export type StoreAction = (store: Store) => number | Promise<number>;

/**
 * Opens the configured store (PostgreSQL when OPTMARK_DATABASE_URL is set, else the data directory's
 * SQLite file), runs `action`, closes it; a StoreError becomes one stderr line and status 1.
 */
export async function withStore(command: string, action: StoreAction): Promise<number> {
  let store: Store | undefined;
  try {
    store = await openStore(loadConfig());
    return await action(store);
  } catch (err) {
    if (err instanceof StoreError) {
      process.stderr.write(`optmark ${command}: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await store?.close();
  }
}

/** Formats rows as left-aligned columns separated by two spaces (header row first). */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return `${rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n')}\n`;
}

/** Writes a value as indented JSON on stdout (the `--json` output of the reporting commands). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints a listing on stdout: JSON with --json, else a table, or a hint when there is nothing to list. */
export function printListing<T>(items: readonly T[], how: { json: boolean | undefined; empty: string; header: string[]; row: (item: T) => string[] }): void {
  if (how.json) printJson(items);
  else if (items.length === 0) process.stdout.write(`${how.empty}\n`);
  else process.stdout.write(table([how.header, ...items.map(how.row)]));
}
