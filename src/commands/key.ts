/** `optmark key ...`: issue, list and revoke API keys. Keys are printed once, at issue, and never logged. */
import { parseCommandArgs } from './args.js';
import { positionals, printListing, runSubcommand, type Subcommand } from '../store/operator.js';

const SUBCOMMANDS: Record<string, Subcommand> = {
  issue: {
    usage: 'key issue <account>',
    parse(args) {
      const cmd = 'key issue';
      const [account] = positionals(cmd, parseCommandArgs(cmd, args, {}).positionals, ['account']);
      return async (store) => {
        const { key, prefix } = await store.issueKey(account);
        // The note goes to stderr so that standard output is the key alone (scripts take its last line).
        process.stderr.write(`issued key ${prefix}… for account ${account}; it is shown only now, store it safely:\n`);
        process.stdout.write(`${key}\n`);
        return 0;
      };
    },
  },
  list: {
    usage: 'key list <account> [--json]',
    parse(args) {
      const cmd = 'key list';
      const { values, positionals: pos } = parseCommandArgs(cmd, args, { json: { type: 'boolean' } });
      const [account] = positionals(cmd, pos, ['account']);
      return async (store) => {
        printListing(await store.listKeys(account), {
          json: values.json,
          empty: `account ${account} has no keys (issue one: optmark key issue ${account})`,
          header: ['PREFIX', 'CREATED', 'LAST USED (±1 min)', 'STATUS'],
          row: (k) => [k.prefix, k.createdAt, k.lastUsedAt ?? 'never', k.revokedAt === null ? 'active' : `revoked ${k.revokedAt}`],
        });
        return 0;
      };
    },
  },
  revoke: {
    usage: 'key revoke <key-prefix>   (at least 12 characters, as `key list` shows)',
    parse(args) {
      const cmd = 'key revoke';
      const [prefix] = positionals(cmd, parseCommandArgs(cmd, args, {}).positionals, ['key-prefix']);
      return async (store) => {
        const r = await store.revokeKey(prefix);
        process.stdout.write(
          r.alreadyRevoked
            ? `key ${r.prefix} of account ${r.account} was already revoked\n`
            : `revoked key ${r.prefix} of account ${r.account}; requests with it are refused from now on\n`,
        );
        return 0;
      };
    },
  },
};

/** Entry point of `optmark key`. */
export async function main(args: string[]): Promise<number> {
  return runSubcommand('key', SUBCOMMANDS, args);
}
