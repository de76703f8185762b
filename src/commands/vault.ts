/**
 * `optmark vault rotate-key [--new-key-file FILE]`: the Private Vault's master key replaced, every
 * account's data key re-wrapped under the new one in one transaction (src/vault/rotate.ts has the order
 * that survives a kill; docs/vault.md, "Rotating the master key").
 */
import type { Command } from 'commander';
import { exitWith, UsageError } from './args.js';
import { withStore } from './operator.js';

async function rotateKey(opts: { newKeyFile?: string }): Promise<number> {
  const [{ loadConfig }, { readKeyFile }, { parse, tooLarge, VaultKeyError }, { rotateMasterKey }] = await Promise.all([
    import('../config.js'),
    import('../secrets/files.js'),
    import('../vault/keys.js'),
    import('../vault/rotate.js'),
  ]);
  let given: Buffer | undefined;
  if (opts.newKeyFile !== undefined) {
    const file = opts.newKeyFile;
    let bytes: Buffer | undefined;
    try {
      bytes = await readKeyFile(file, 4096, tooLarge(file));
      if (bytes !== undefined) given = parse(file, bytes);
    } catch (err) {
      throw new UsageError(`vault rotate-key: --new-key-file: ${(err as Error).message}`);
    }
    if (bytes === undefined) throw new UsageError(`vault rotate-key: --new-key-file names ${file}, which does not exist`);
  }
  const config = loadConfig();
  return withStore('vault rotate-key', async (store) => {
    try {
      const r = await rotateMasterKey(config.dataDir, store, config.vaultMasterKeyFile, given);
      process.stdout.write(
        r.how === 'finished'
          ? `finished a rotation that was cut short: ${r.where} now holds the key that wraps the data keys of ${r.accounts} accounts\n`
          : `re-wrapped the vault data keys of ${r.accounts} accounts under a new master key, kept in ${r.where}; ` +
              'the old key no longer opens the vault: back the new one up with the store\n',
      );
      return 0;
    } catch (err) {
      if (!(err instanceof VaultKeyError)) throw err;
      process.stderr.write(`optmark vault rotate-key: ${err.message}\n`);
      return 1;
    }
  });
}

export function register(program: Command): void {
  const vault = program.command('vault').summary("the Private Vault's master key").description('Operations on the Private Vault as a whole (docs/vault.md).');
  vault
    .command('rotate-key')
    .summary('replace the vault master key, re-wrapping every data key')
    .description(
      "Re-wrap every account's vault data key under a new master key (random, or --new-key-file's 32 bytes) in one transaction, then replace the key " +
        "where `serve` reads it: the data dir's vault-master.key, OPTMARK_VAULT_MASTER_KEY_FILE's file, or with PostgreSQL the store's shared secret. " +
        'The objects are not touched. Stop every instance (and any `mark --vault`) first. Run it again after a cut-short run: it finishes that one.',
    )
    .option('--new-key-file <file>', 'the new master key: a file of 32 random bytes (default: 32 made here)')
    .action(async (opts: { newKeyFile?: string }) => {
      exitWith(await rotateKey(opts));
    });
}
