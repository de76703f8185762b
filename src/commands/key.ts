/** `optmark key ...`: issue, list and revoke API keys. Keys are printed once, at issue, and never logged. */
import type { Command } from 'commander';
import { exitWith } from './args.js';
import { printListing, withStore } from './operator.js';

export function register(program: Command): void {
  const key = program
    .command('key')
    .summary('issue, list and revoke API keys')
    .description('Issue, list and revoke API keys. A key is printed once, when issued; only its prefix is stored in the clear.');

  key
    .command('issue')
    .summary('issue a key for an account')
    .description('Issue a key for an account. Standard output is the key alone (scripts take its last line).')
    .argument('<account>', 'account name')
    .action(async (account: string) => {
      exitWith(
        await withStore('key issue', async (store) => {
          const { key: issued, prefix } = await store.issueKey(account);
          // The note goes to stderr so that standard output is the key alone (scripts take its last line).
          process.stderr.write(`issued key ${prefix}… for account ${account}; it is shown only now, store it safely:\n`);
          process.stdout.write(`${issued}\n`);
          return 0;
        }),
      );
    });

  key
    .command('list')
    .summary("list an account's keys")
    .description("List an account's keys: prefix, creation, last use (to the minute) and status.")
    .argument('<account>', 'account name')
    .option('--json', 'print JSON instead of a table')
    .action(async (account: string, opts: { json?: boolean }) => {
      exitWith(
        await withStore('key list', async (store) => {
          printListing(await store.listKeys(account), {
            json: opts.json,
            empty: `account ${account} has no keys (issue one: optmark key issue ${account})`,
            header: ['PREFIX', 'CREATED', 'LAST USED (±1 min)', 'STATUS'],
            row: (k) => [k.prefix, k.createdAt, k.lastUsedAt ?? 'never', k.revokedAt === null ? 'active' : `revoked ${k.revokedAt}`],
          });
          return 0;
        }),
      );
    });

  key
    .command('revoke')
    .summary('revoke a key by its prefix')
    .description('Revoke a key by its prefix (at least 12 characters, as `key list` shows); requests with it are refused from then on.')
    .argument('<key-prefix>', 'the first 12 or more characters of the key')
    .action(async (prefix: string) => {
      exitWith(
        await withStore('key revoke', async (store) => {
          const r = await store.revokeKey(prefix);
          process.stdout.write(
            r.alreadyRevoked
              ? `key ${r.prefix} of account ${r.account} was already revoked\n`
              : `revoked key ${r.prefix} of account ${r.account}; requests with it are refused from now on\n`,
          );
          return 0;
        }),
      );
    });
}
