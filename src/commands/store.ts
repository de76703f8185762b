/**
 * `optmark store migrate --to <postgres-url> [--force]`: copies the configured store (the data directory's
 * SQLite file, or the PostgreSQL of OPTMARK_DATABASE_URL) into a PostgreSQL database, in one transaction:
 * accounts with their plans and limits, key hashes (so every issued key keeps working), the monthly
 * counters (committed units), the dashboard's batches and records, the provenance public keys and the
 * fingerprint key. A target that holds anything is refused (exit status 3) unless --force, which replaces
 * its accounts, keys, counters, batches and records (docs/scaling.md, "Moving a store").
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { exitWith } from './args.js';

/** The exit status of a refusal to write into a store that is not empty. */
export const TARGET_NOT_EMPTY = 3;

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "2 accounts, 3 keys, ..." for the kinds that are not zero. */
function describeCounts(c: import('../store/index.js').StoreCounts): string {
  const parts = [
    plural(c.accounts, 'account'),
    plural(c.keys, 'key'),
    plural(c.counters, 'usage counter'),
    plural(c.batches, 'dashboard batch', 'dashboard batches'),
    plural(c.records, 'dashboard record'),
    plural(c.publicKeys, 'public signing key'),
    plural(c.secrets, 'shared secret'),
  ].filter((p) => !p.startsWith('0 '));
  return parts.length > 0 ? parts.join(', ') : 'nothing';
}

async function migrate(opts: { to: string; force?: boolean }): Promise<number> {
  const config = loadConfig();
  const [{ openStore, postgresEngine, StoreError, parseDatabaseUrl }, { localPublicKeys }, { FINGERPRINT_SECRET, localFingerprintKey }] = await Promise.all([
    import('../store/index.js'),
    import('../provenance/keys.js'),
    import('../secrets/shared.js'),
  ]);
  const say = (line: string) => process.stderr.write(`optmark store migrate: ${line}\n`);
  let target;
  try {
    target = parseDatabaseUrl(opts.to);
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    say(`--to: ${err.message.replace('OPTMARK_DATABASE_URL', 'the target')}`);
    return 2;
  }
  if (config.databaseUrl !== undefined) {
    const source = parseDatabaseUrl(config.databaseUrl);
    if (source.connectionString === target.connectionString && source.schema === target.schema) {
      say(`the target is the configured store itself (${target.display}); nothing to copy`);
      return 2;
    }
  } else if (!existsSync(join(config.dataDir, 'optmark.db'))) {
    say(`there is no store to copy: ${join(config.dataDir, 'optmark.db')} does not exist (set OPTMARK_DATA_DIR to the data directory)`);
    return 1;
  }
  let source;
  let into;
  try {
    source = await openStore(config);
    const { PostgresStore } = await postgresEngine();
    into = await PostgresStore.open({
      url: opts.to,
      defaultProtectLimit: config.defaultProtectLimit,
      defaultVerifyLimit: config.defaultVerifyLimit,
    });
    const before = await into.counts();
    if (!(await into.isEmpty()) && !opts.force) {
      say(
        `the target ${target.display} is not empty (${describeCounts(before)}); nothing was copied. ` +
          "Add --force to replace its accounts, keys, counters and dashboard records with this store's (stop the instances that use it first).",
      );
      return TARGET_NOT_EMPTY;
    }
    // The Private Vault's rows and sealed objects are not carried (docs/vault.md, "Backups and moving"):
    // copying the store without them would leave the objects to the target's reconciler.
    const kept = await source.vault.objectCount();
    if (kept > 0) {
      say(`the store keeps ${kept} Private Vault object(s), which store migrate does not carry; nothing was copied (docs/vault.md, "Backups and moving").`);
      return 1;
    }
    // Units held by a server that died are given back first; held units of a running one are not copied.
    await source.reconcile();
    const snapshot = await source.snapshot();
    // The data directory's files: its provenance public keys, and (unless the operator keeps the key in a
    // file of their own) the fingerprint key, so that marks made before the move stay detectable.
    const known = new Set(snapshot.publicKeys.map((k) => k.keyId));
    const now = new Date().toISOString();
    for (const [keyId, pem] of await localPublicKeys(config.dataDir)) if (!known.has(keyId)) snapshot.publicKeys.push({ keyId, pem, recordedAt: now });
    if (config.fingerprintSecretFile === undefined && !snapshot.secrets.some((s) => s.name === FINGERPRINT_SECRET)) {
      const local = await localFingerprintKey(config.dataDir);
      if (local) snapshot.secrets.push({ name: FINGERPRINT_SECRET, value: local });
    }
    await into.restore(snapshot);
    const after = await into.counts();
    const short = (['accounts', 'keys', 'counters', 'batches', 'records'] as const).filter((k) => after[k] !== snapshot[k].length);
    if (short.length > 0 || after.publicKeys < snapshot.publicKeys.length) {
      say(`the copy does not match its source (${describeCounts(after)} in the target); check the target before using it`);
      return 1;
    }
    const revoked = snapshot.keys.filter((k) => k.revokedAt !== null).length;
    const months = [...new Set(snapshot.counters.map((c) => c.month))].sort();
    const fingerprint = snapshot.secrets.some((s) => s.name === FINGERPRINT_SECRET);
    process.stdout.write(
      `copied ${source.location} into ${target.display}${before.accounts + before.keys + before.counters > 0 ? ' (its previous content replaced)' : ''}:\n` +
        `  ${plural(snapshot.accounts.length, 'account')}\n` +
        `  ${plural(snapshot.keys.length, 'key')} (${revoked} revoked)\n` +
        `  ${plural(snapshot.counters.length, 'usage counter')}${months.length > 0 ? ` (${months.join(', ')})` : ''}\n` +
        `  ${plural(snapshot.batches.length, 'dashboard batch', 'dashboard batches')}, ${plural(snapshot.records.length, 'dashboard record')}\n` +
        `  ${plural(snapshot.publicKeys.length, 'public signing key')}\n` +
        `  fingerprint key: ${fingerprint ? 'copied' : config.fingerprintSecretFile !== undefined ? `not copied (kept in ${config.fingerprintSecretFile})` : 'none yet'}\n` +
        `next: give every instance OPTMARK_DATABASE_URL=${target.display} (docs/scaling.md)\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof StoreError) {
      say(err.message);
      return 1;
    }
    throw err;
  } finally {
    await source?.close();
    await into?.close();
  }
}

export function register(program: Command): void {
  const store = program.command('store').summary('move the store into PostgreSQL').description('Operations on the store as a whole (docs/scaling.md).');

  store
    .command('migrate')
    .summary('copy this store into a PostgreSQL database')
    .description(
      "Copy the configured store (the data directory's SQLite file, or OPTMARK_DATABASE_URL) into the PostgreSQL database at --to, in one transaction: " +
        'accounts, key hashes, usage counters, dashboard batches and records, provenance public keys and the fingerprint key. ' +
        `Stop the server first. A target that holds anything is refused (exit status ${TARGET_NOT_EMPTY}) unless --force.`,
    )
    .requiredOption('--to <url>', 'the target: postgres://user:password@host:5432/database[?schema=name]')
    .option('--force', "replace the target's accounts, keys, counters and dashboard records when it is not empty")
    .action(async (opts: { to: string; force?: boolean }) => {
      exitWith(await migrate(opts));
    });
}
