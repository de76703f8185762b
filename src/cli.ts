/**
 * optmark's command line: `./bin/optmark <command> [args]` (also `npm run optmark -- <command>`), on
 * commander. Each command lives in src/commands/<name>.ts and adds itself with `register(program)`;
 * only the module of the command asked for is loaded (all of them for the overall help), and the
 * commands load their heavy parts (sharp, uWebSockets.js, the worker pool) in their actions, so
 * `key list` does not pay for them.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError } from 'commander';
import { UsageError } from './commands/args.js';
import { ConfigError } from './config.js';
import { fileErrorReason } from './datadir.js';

/** What each command module exports. */
export type Register = (program: Command) => void;

/** The commands in the order the overall help lists them. */
const COMMANDS: Record<string, () => Promise<{ register: Register }>> = {
  serve: () => import('./commands/serve.js'),
  account: () => import('./commands/account.js'),
  key: () => import('./commands/key.js'),
  usage: () => import('./commands/usage.js'),
  mark: () => import('./commands/mark.js'),
  verify: () => import('./commands/verify.js'),
  scan: () => import('./commands/scan.js'),
  'site-signals': () => import('./commands/site-signals.js'),
  'signing-key': () => import('./commands/signing-key.js'),
  store: () => import('./commands/store.js'),
  vault: () => import('./commands/vault.js'),
  bench: () => import('./commands/bench.js'),
};

/** optmark's version, from the package.json above this module (src/ or dist/src/). */
function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++, dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'optmark' && pkg.version) return pkg.version;
    }
  }
  return 'unknown';
}

/**
 * Builds the program with every command, or only `only` when it names one. Errors do not exit the
 * process: they throw CommanderError (see run) after commander has printed them.
 */
export async function buildProgram(only?: string): Promise<Command> {
  const program = new Command('optmark')
    .description('Mark images with the IPTC/PLUS AI-training opt-out field and verify them: the HTTP service and its operator commands.')
    .version(version(), '-V, --version', 'print the version')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  const names = only !== undefined && Object.hasOwn(COMMANDS, only) ? [only] : Object.keys(COMMANDS);
  for (const name of names) (await COMMANDS[name]!()).register(program);
  return program;
}

/** Errors whose message already says what went wrong and what to do. */
const EXPLAINED_ERRORS = new Set([
  'UwsFallbackError',
  'ListenError',
  'DataDirError',
  'DirRefusedError',
  'C2paIdentityError',
  'SigningKeyError',
  'VaultKeyError',
]);

/**
 * A file system refusal (a path this user may not write, a file where a directory should be) in one
 * line: it is the operator's to fix, and a stack trace would only bury the path. Undefined for others.
 */
function fileErrorMessage(err: unknown): string | undefined {
  const e = err as NodeJS.ErrnoException | undefined;
  const reason = fileErrorReason(e?.code);
  if (!reason || typeof e?.path !== 'string') return undefined;
  return `cannot ${e.syscall ?? 'use'} ${e.path}: ${reason} (${e.code})`;
}

/** Runs the command line `argv` (without node and the script); resolves to the exit status. */
export async function run(argv: string[]): Promise<number> {
  process.exitCode = undefined;
  try {
    const program = await buildProgram(argv[0]);
    if (argv.length === 0) {
      process.stderr.write(program.helpInformation());
      return 2;
    }
    await program.parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    // commander has printed its message (or the help) already; help asked for is a success.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof ConfigError) {
      process.stderr.write(`optmark: configuration error: ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    if (err instanceof UsageError) {
      const hint = err.message.includes('usage:') ? '' : '(add --help for usage)\n';
      process.stderr.write(`optmark: ${err.message}\n${hint}`);
      return 2;
    }
    if (err instanceof Error && EXPLAINED_ERRORS.has(err.name)) {
      // These carry their own explanation and remedies; a stack trace would only bury them.
      process.stderr.write(`optmark: ${err.message}\n`);
      return 1;
    }
    const plain = fileErrorMessage(err);
    if (plain) {
      process.stderr.write(`optmark: ${plain}\n`);
      return 1;
    }
    process.stderr.write(`optmark: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}

function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  run(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
