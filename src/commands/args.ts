/** Argument parsing shared by the commands: node:util parseArgs with errors that print as usage. */
import { parseArgs, type ParseArgsConfig } from 'node:util';

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

/** Parses a non-negative whole number argument or throws a UsageError naming the flag. */
export function wholeNumber(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw new UsageError(`${flag} expects a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new UsageError(`${flag} is too large: ${raw}`);
  return n;
}
