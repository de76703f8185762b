/**
 * What the commands share for their arguments: UsageError (printed without a stack, exit status 2), the
 * option value parsers given to commander (each throws InvalidArgumentError with a plain sentence that
 * commander prints after the option's name), and the node:util parser `mark` still uses.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InvalidArgumentError } from 'commander';

/** Thrown by commands for bad arguments: printed without a stack, exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses `args` strictly; unknown flags and missing values become a UsageError naming the command. */
export function parseCommandArgs<T extends Options>(command: string, args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${command}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const WHOLE = 'It must be a whole number of 0 or more';

// commander prints these after "error: option '--flag <n>' argument 'value' is invalid.", so each is a
// sentence of its own that says what the value must be.
function whole(raw: string, message: string): number {
  const text = raw.trim();
  if (!/^\d+$/.test(text)) throw new InvalidArgumentError(`${message}.`);
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`${message}, at most ${Number.MAX_SAFE_INTEGER}.`);
  return n;
}

/** A whole number of 0 or more (commander option parser). */
export function wholeNumber(raw: string): number {
  return whole(raw, WHOLE);
}

/** A whole number of 1 or more (commander option parser). */
export function positiveWholeNumber(raw: string): number {
  const n = whole(raw, 'It must be a whole number of 1 or more');
  if (n < 1) throw new InvalidArgumentError('It must be a whole number of 1 or more.');
  return n;
}

/**
 * A monthly limit: a whole number of 0 or more, or "default" (follow the configured default). Not null for
 * "default": commander turns an option parser's null into '' (which the store refused as a limit).
 */
export function limit(raw: string): number | 'default' {
  return raw.trim() === 'default' ? 'default' : whole(raw, `${WHOLE} (or "default")`);
}

/** A number (not necessarily whole) greater than 0. */
export function positiveNumber(raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('It must be a number greater than 0.');
  return n;
}

/** A number (not necessarily whole) of 0 or more. */
export function nonNegativeNumber(raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError('It must be a number of 0 or more.');
  return n;
}

/** A comma-separated list with at least one item. */
export function commaList(raw: string): string[] {
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError('It must be a comma-separated list.');
  return items;
}

/** Sets the process's exit status from a command's result (commander ignores what actions return). */
export function exitWith(code: number): void {
  process.exitCode = code;
}
