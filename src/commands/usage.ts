/** `optmark usage <account> [--month YYYY-MM]`: an account's protect and verify counters for a UTC month. */
import { parseCommandArgs } from './args.js';
import { positionals, printJson, table, withStore } from '../store/operator.js';

function duration(seconds: number): string {
  const d = Math.floor(seconds / 86_400);
  const h = Math.floor((seconds % 86_400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m` : `${seconds}s`;
}

/** Entry point of `optmark usage`. */
export async function main(args: string[]): Promise<number> {
  const cmd = 'usage';
  const { values, positionals: pos } = parseCommandArgs(cmd, args, { month: { type: 'string' }, json: { type: 'boolean' } });
  const [account] = positionals(cmd, pos, ['account']);
  return withStore(cmd, async (store) => {
    // Units held by an instance that died are given back first (a same-host process that is gone, or
    // an expired lease), so the report never counts a request that was never answered.
    await store.reconcile();
    const u = await store.usage(account, values.month);
    if (values.json) {
      printJson({ account, ...u });
      return 0;
    }
    const rows = [u.protect, u.verify].map((s) => [s.operation, String(s.used), String(s.limit), String(s.remaining)]);
    // Limits are not kept per month: a past month is shown against today's limits.
    const reset = u.protect.resetSeconds > 0 ? `resets in ${duration(u.protect.resetSeconds)}` : 'month over, limits as set now';
    process.stdout.write(`account ${account}, ${u.month} (UTC), ${reset}\n${table([['OPERATION', 'USED', 'LIMIT', 'REMAINING'], ...rows])}`);
    const held = u.held.protect + u.held.verify;
    if (held > 0) process.stdout.write(`${held} of the used units are held by requests in progress (given back if they fail)\n`);
    return 0;
  });
}
