/** `optmark account ...`: create and list accounts, change their plan and monthly limits. */
import { type Command, Option } from 'commander';
import { hasApiAccess, type Account, type Plan } from '../store/index.js';
import { exitWith, limit, UsageError } from './args.js';
import { printListing, withStore } from './operator.js';

const PLAN_CHOICES: readonly Plan[] = ['free', 'pro', 'lifetime'];

/** One line about an account: its limits when its plan can use them, else that it has no API access. */
function describe(a: Account): string {
  if (!hasApiAccess(a.plan)) {
    return (
      `account ${a.name}: plan ${a.plan}, no API access (the ${a.plan} plan cannot call protect or verify; ` +
      `\`optmark account set-plan ${a.name} pro\` gives it access)\n`
    );
  }
  return `account ${a.name}: plan ${a.plan}, ${a.protectLimit} protects and ${a.verifyLimit} verifies a month\n`;
}

function planOption(): Option {
  return new Option('--plan <plan>', 'the plan: free (no API access), pro or lifetime').choices(PLAN_CHOICES);
}

export function register(program: Command): void {
  const account = program
    .command('account')
    .summary('create and list accounts, set their plan and monthly limits')
    .description('Create and list accounts, set their plan and monthly limits (stored in OPTMARK_DATA_DIR).');

  account
    .command('create')
    .summary('create an account on a plan')
    .description('Create an account. Only the pro and lifetime plans may call the API.')
    .argument('<name>', 'account name')
    .addOption(planOption().makeOptionMandatory())
    .action(async (name: string, opts: { plan: Plan }) => {
      exitWith(
        await withStore('account create', async (store) => {
          process.stdout.write(`created ${describe(await store.createAccount(name, opts.plan))}`);
          return 0;
        }),
      );
    });

  account
    .command('list')
    .summary('list the accounts')
    .description('List the accounts with their plan and effective monthly limits.')
    .option('--json', 'print JSON instead of a table')
    .action(async (opts: { json?: boolean }) => {
      exitWith(
        await withStore('account list', async (store) => {
          printListing(await store.listAccounts(), {
            json: opts.json,
            empty: 'no accounts (create one: optmark account create <name> --plan pro)',
            header: ['NAME', 'PLAN', 'PROTECT/MONTH', 'VERIFY/MONTH', 'CREATED'],
            // A free account's limits are kept but cannot be used: it has no API access.
            row: (a) => [a.name, a.plan, ...(hasApiAccess(a.plan) ? [String(a.protectLimit), String(a.verifyLimit)] : ['no API access', '-']), a.createdAt],
          });
          return 0;
        }),
      );
    });

  account
    .command('set-plan')
    .summary("change an account's plan")
    .description("Change an account's plan (as a second argument or with --plan).")
    .argument('<name>', 'account name')
    .argument('[plan]', 'free, pro or lifetime')
    .addOption(planOption())
    .action(async (name: string, positional: string | undefined, opts: { plan?: Plan }) => {
      if (positional !== undefined && opts.plan !== undefined) throw new UsageError('account set-plan: give the plan once (as an argument or with --plan)');
      const plan = positional ?? opts.plan;
      if (plan === undefined) throw new UsageError(`account set-plan: the plan is required (${PLAN_CHOICES.join(', ')})`);
      if (!(PLAN_CHOICES as readonly string[]).includes(plan)) {
        throw new UsageError(`account set-plan: plan must be one of ${PLAN_CHOICES.join(', ')}, got ${JSON.stringify(plan)}`);
      }
      exitWith(
        await withStore('account set-plan', async (store) => {
          process.stdout.write(`updated ${describe(await store.setPlan(name, plan as Plan))}`);
          return 0;
        }),
      );
    });

  account
    .command('set-limits')
    .summary("set an account's monthly limits")
    .description('Set monthly limits of an account; "default" follows the configured default again.')
    .argument('<name>', 'account name')
    .option('--protect <n|default>', 'protects a month (a whole number of 0 or more, or "default")', limit)
    .option('--verify <n|default>', 'verifies a month (a whole number of 0 or more, or "default")', limit)
    .option('--vault <bytes|default>', 'Private Vault bytes (a whole number of 0 or more, or "default": OPTMARK_VAULT_LIMIT_BYTES)', limit)
    .action(async (name: string, opts: { protect?: number | 'default'; verify?: number | 'default'; vault?: number | 'default' }) => {
      if (opts.protect === undefined && opts.verify === undefined && opts.vault === undefined) {
        throw new UsageError('account set-limits: give --protect, --verify and/or --vault');
      }
      // null: the account follows the configured default again.
      const limits = { protect: opts.protect === 'default' ? null : opts.protect, verify: opts.verify === 'default' ? null : opts.verify };
      exitWith(
        await withStore('account set-limits', async (store) => {
          const account = limits.protect === undefined && limits.verify === undefined ? await store.getAccount(name) : await store.setLimits(name, limits);
          if (opts.vault !== undefined) {
            const bytes = opts.vault === 'default' ? null : opts.vault;
            await store.vault.setLimit(account.id, bytes);
            process.stdout.write(`vault limit of ${account.name}: ${bytes === null ? 'the default (OPTMARK_VAULT_LIMIT_BYTES)' : `${bytes} bytes`}\n`);
          }
          process.stdout.write(`updated ${describe(account)}`);
          return 0;
        }),
      );
    });
}
