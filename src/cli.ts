/**
 * optmark's command line: `./bin/optmark <command> [args]` (also `npm run optmark -- <command>`).
 * Each command lives in src/commands/ and is loaded only when asked for, so `key list` does not pay for
 * loading sharp or uWebSockets.js.
 */
import { UsageError } from './commands/args.js';
import { ConfigError } from './config.js';

export type CommandMain = (args: string[]) => Promise<number>;

interface CommandEntry {
  summary: string;
  load: () => Promise<{ main: CommandMain }>;
}

const COMMANDS: Record<string, CommandEntry> = {
  serve: { summary: 'start the HTTP service', load: () => import('./commands/serve.js') },
  account: { summary: 'create and list accounts, set their plan and monthly limits', load: () => import('./commands/account.js') },
  key: { summary: 'issue, list and revoke API keys', load: () => import('./commands/key.js') },
  usage: { summary: "show an account's protect and verify counts for a month", load: () => import('./commands/usage.js') },
  bench: { summary: 'capacity test: `bench load` drives the real server open-loop and writes reports', load: () => import('./commands/bench.js') },
  mark: { summary: 'mark files and folders with the opt-out field and optional layers (provenance, fingerprint)', load: () => import('./commands/mark.js') },
  verify: { summary: 'verify files and folders: the opt-out field, provenance tag and fingerprint, as the API reports them', load: () => import('./commands/verify.js') },
  'signing-key': { summary: 'rotate and list the provenance signing keys', load: () => import('./commands/signing-key.js') },
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: optmark <command> [args]\n\ncommands:\n${lines.join('\n')}\n`;
}

/** Errors whose message already says what went wrong and what to do. */
const EXPLAINED_ERRORS = new Set(['UwsFallbackError']);

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    process.stderr.write(`optmark: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  const { main } = await entry.load();
  return main(args);
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`optmark: configuration error: ${err.message}\n`);
      process.exitCode = 78; // EX_CONFIG
      return;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`optmark: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof Error && EXPLAINED_ERRORS.has(err.name)) {
      // These carry their own explanation and remedies; a stack trace would only bury them.
      process.stderr.write(`optmark: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    process.stderr.write(`optmark: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
