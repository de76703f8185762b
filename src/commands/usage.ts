/** `optmark usage <account> [--month YYYY-MM]`: an account's protect and verify counters for a UTC month. */
import type { Command } from 'commander';
import { monthBounds, utcMinuteText } from '../store/quota.js';
import { exitWith } from './args.js';
import { printJson, table, withStore } from './operator.js';

function duration(seconds: number): string {
  const d = Math.floor(seconds / 86_400);
  const h = Math.floor((seconds % 86_400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m` : `${seconds}s`;
}

export function register(program: Command): void {
  program
    .command('usage')
    .summary("show an account's protect and verify counts for a month")
    .description("Show an account's protect and verify counts, limits and what remains for a UTC month (default: this one).")
    .argument('<account>', 'account name')
    .option('--month <YYYY-MM>', 'the UTC month to show (default: the current one)')
    .option('--json', 'print JSON instead of a table')
    .action(async (account: string, opts: { month?: string; json?: boolean }) => {
      exitWith(
        await withStore('usage', async (store) => {
          // Units held by an instance that died are given back first (a process of this host that is
          // gone, or an expired lease), so the report never counts a request that was never answered.
          await store.reconcile();
          const u = await store.usage(account, opts.month);
          if (opts.json) {
            printJson({ account, ...u });
            return 0;
          }
          const rows = [u.protect, u.verify].map((s) => [s.operation, String(s.used), String(s.limit), String(s.remaining)]);
          // Limits are not kept per month: a past month is shown against today's limits.
          const reset =
            u.protect.resetSeconds > 0
              ? `resets at ${utcMinuteText(new Date(monthBounds(u.month).end))} (in ${duration(u.protect.resetSeconds)})`
              : 'month over, limits as set now';
          process.stdout.write(`account ${account}, ${u.month} (UTC), ${reset}\n${table([['OPERATION', 'USED', 'LIMIT', 'REMAINING'], ...rows])}`);
          const held = u.held.protect + u.held.verify;
          if (held > 0) process.stdout.write(`${held} of the used units are held by requests in progress (kept if they succeed, given back if they fail)\n`);
          return 0;
        }),
      );
    });
}
