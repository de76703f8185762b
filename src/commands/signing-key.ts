/**
 * `optmark signing-key rotate|list`: the provenance signing keys in the data directory. Private keys
 * are never printed; only key ids are.
 */
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import type { KeyLocation } from '../provenance/index.js';
import { exitWith } from './args.js';
import { printListing } from './operator.js';

function location(): KeyLocation {
  const config = loadConfig();
  return { dataDir: config.dataDir, file: config.signingKeyFile };
}

/**
 * With a PostgreSQL store (OPTMARK_DATABASE_URL), the public keys of every instance live in the store:
 * this data directory's keys are published there and the others' written here, before a listing and
 * after a rotation, so that every instance verifies the new key (running servers hear of it at once).
 */
async function shareKeys(command: string): Promise<number> {
  const config = loadConfig();
  if (config.databaseUrl === undefined) return 0;
  const [{ openStore, StoreError }, { syncPublicKeys }] = await Promise.all([import('../store/index.js'), import('../provenance/shared.js')]);
  let store;
  try {
    store = await openStore(config);
    await syncPublicKeys(store, config.dataDir);
    return 0;
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    process.stderr.write(`optmark signing-key ${command}: ${err.message}\n`);
    return 1;
  } finally {
    await store?.close();
  }
}

/** Runs `work` with the provenance module (loaded only here); a SigningKeyError becomes one stderr line and status 1. */
async function withKeys(command: string, work: (p: typeof import('../provenance/index.js')) => Promise<number>): Promise<number> {
  const provenance = await import('../provenance/index.js');
  try {
    return await work(provenance);
  } catch (err) {
    if (err instanceof provenance.SigningKeyError) {
      process.stderr.write(`optmark signing-key ${command}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

export function register(program: Command): void {
  const signingKey = program
    .command('signing-key')
    .summary('rotate and list the provenance signing keys')
    .description('Rotate and list the Ed25519 keys that sign provenance tags (docs/provenance.md). Private keys are never printed.');

  signingKey
    .command('rotate')
    .summary('make a new current signing key')
    .description('Make a new current signing key; every older public key is kept, so tags signed before stay verifiable (running servers pick it up).')
    .action(async () => {
      exitWith(
        await withKeys('rotate', async ({ rotateSigningKey }) => {
          const r = await rotateSigningKey(location());
          if ((await shareKeys('rotate')) !== 0) return 1;
          const kept = r.previousKeyId ? `; ${r.previousKeyId} and every earlier public key stay for verification` : '';
          process.stdout.write(`signing key ${r.keyId} is now current${kept}\n`);
          return 0;
        }),
      );
    });

  signingKey
    .command('list')
    .summary('list the signing keys')
    .description('The key ids this data directory verifies, and which one signs.')
    .option('--json', 'print JSON instead of a table')
    .action(async (opts: { json?: boolean }) => {
      exitWith(
        await withKeys('list', async ({ listSigningKeys }) => {
          if ((await shareKeys('list')) !== 0) return 1;
          const listing = await listSigningKeys(location());
          printListing(listing.keys, {
            json: opts.json,
            empty: 'no signing keys yet (one is created by the first `optmark mark --provenance`, or by `optmark signing-key rotate`)',
            header: ['KEY ID', 'RECORDED', 'USE'],
            row: (k) => [k.keyId, k.recordedAt, k.current ? 'signs and verifies (current)' : 'verifies'],
          });
          for (const name of listing.unreadable) process.stderr.write(`optmark signing-key list: ${name} is not a usable Ed25519 key\n`);
          return 0;
        }),
      );
    });
}
