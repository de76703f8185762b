/**
 * `optmark signing-key rotate|list`: the provenance signing keys in the data directory. Private keys
 * are never printed; only key ids are.
 */
import { loadConfig } from '../config.js';
import { listSigningKeys, rotateSigningKey, SigningKeyError, type KeyLocation } from '../provenance/index.js';
import { printListing } from '../store/operator.js';
import { parseCommandArgs, UsageError } from './args.js';

const HELP = `usage:
  optmark signing-key rotate        make a new current signing key; every older public key is kept,
                                    so tags signed before stay verifiable (running servers pick it up)
  optmark signing-key list [--json] the key ids this data directory verifies, and which one signs
`;

function location(): KeyLocation {
  const config = loadConfig();
  return { dataDir: config.dataDir, file: config.signingKeyFile };
}

function noPositionals(command: string, got: string[]): void {
  if (got.length > 0) throw new UsageError(`${command}: unexpected argument ${JSON.stringify(got[0])}\n${HELP}`);
}

async function rotate(args: string[]): Promise<number> {
  noPositionals('signing-key rotate', parseCommandArgs('signing-key rotate', args, {}).positionals);
  const r = await rotateSigningKey(location());
  const kept = r.previousKeyId ? `; ${r.previousKeyId} and every earlier public key stay for verification` : '';
  process.stdout.write(`signing key ${r.keyId} is now current${kept}\n`);
  return 0;
}

async function list(args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs('signing-key list', args, { json: { type: 'boolean' } });
  noPositionals('signing-key list', positionals);
  const listing = await listSigningKeys(location());
  printListing(listing.keys, {
    json: values.json,
    empty: 'no signing keys yet (one is created by the first `optmark mark --provenance`, or by `optmark signing-key rotate`)',
    header: ['KEY ID', 'RECORDED', 'USE'],
    row: (k) => [k.keyId, k.recordedAt, k.current ? 'signs and verifies (current)' : 'verifies'],
  });
  for (const name of listing.unreadable) process.stderr.write(`optmark signing-key list: ${name} is not a usable Ed25519 key\n`);
  return 0;
}

/** Entry point of `optmark signing-key`. */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(HELP);
    return 0;
  }
  const run = name === 'rotate' ? rotate : name === 'list' ? list : undefined;
  if (!run) throw new UsageError(`signing-key: ${name === undefined ? 'a subcommand is required' : `unknown subcommand "${name}"`}\n${HELP}`);
  try {
    return await run(rest);
  } catch (err) {
    if (err instanceof SigningKeyError) {
      process.stderr.write(`optmark signing-key ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
