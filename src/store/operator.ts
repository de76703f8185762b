/**
 * What the operator commands (account, key, usage) share: opening the store from the configuration,
 * subcommand dispatch, operator errors as one line on stderr, and plain aligned tables.
 */
import { loadConfig } from '../config.js';
import { UsageError } from '../commands/args.js';
import { StoreError } from './errors.js';
import { openStore, type Store } from './index.js';

/** Work to do once the arguments are parsed; returns the exit status. */
export type StoreAction = (store: Store) => number | Promise<number>;

export interface Subcommand {
  /** One usage line, without the leading "optmark". */
  usage: string;
  /** Parses the arguments (throwing UsageError) before the store is opened. */
  parse: (args: string[]) => StoreAction;
}

/**
 * Opens the configured store (PostgreSQL when OPTMARK_DATABASE_URL is set, else the data directory's
 * SQLite file), runs `action`, closes it; a StoreError becomes one stderr line and status 1.
 */
export async function withStore(command: string, action: StoreAction): Promise<number> {
  let store: Store | undefined;
  try {
    const config = loadConfig();
    store = await openStore({ ...config, databaseUrl: config.databaseUrl });
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

/** Runs `optmark <command> <subcommand> ...` from a table of subcommands; help goes to stdout. */
export function runSubcommand(command: string, table: Record<string, Subcommand>, args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const help = `usage:\n${Object.values(table)
    .map((s) => `  optmark ${s.usage}`)
    .join('\n')}`;
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(`${help}\n`);
    return Promise.resolve(0);
  }
  const sub = name === undefined ? undefined : table[name];
  if (!sub) {
    const what = name === undefined ? 'a subcommand is required' : `unknown subcommand "${name}"`;
    throw new UsageError(`${command}: ${what}\n${help}`);
  }
  return withStore(`${command} ${name}`, sub.parse(rest));
}

/** Checks the number of positional arguments against their names and returns them in order. */
export function positionals<const N extends readonly string[]>(command: string, got: string[], names: N): { [K in keyof N]: string } {
  if (got.length !== names.length) {
    const want = names.map((n) => `<${n}>`).join(' ');
    throw new UsageError(`${command}: expected ${want || 'no arguments'}, got ${got.length === 0 ? 'none' : got.map((g) => JSON.stringify(g)).join(' ')}`);
  }
  return got as { [K in keyof N]: string };
}

/** Formats rows as left-aligned columns separated by two spaces (header row first). */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
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
