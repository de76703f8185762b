/** `optmark account ...`: create and list accounts, change their plan and monthly limits. */
import { UsageError, parseCommandArgs, wholeNumber } from './args.js';
import { isPlan, PLANS, type Account, type Plan } from '../store/index.js';
import { positionals, printListing, runSubcommand, type Subcommand } from '../store/operator.js';

function plan(command: string, raw: string | undefined): Plan {
  if (raw === undefined) throw new UsageError(`${command}: --plan is required (${PLANS.join(', ')})`);
  if (!isPlan(raw)) throw new UsageError(`${command}: plan must be one of ${PLANS.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw;
}

/** A limit flag: a whole number, or "default" to follow the configured default again. */
function limit(flag: string, raw: string | undefined): number | null | undefined {
  return raw === 'default' ? null : wholeNumber(flag, raw);
}

function describe(a: Account): string {
  return `account ${a.name}: plan ${a.plan}, ${a.protectLimit} protects and ${a.verifyLimit} verifies a month\n`;
}

const SUBCOMMANDS: Record<string, Subcommand> = {
  create: {
    usage: 'account create <name> --plan <free|pro|lifetime>',
    parse(args) {
      const cmd = 'account create';
      const { values, positionals: pos } = parseCommandArgs(cmd, args, { plan: { type: 'string' } });
      const [name] = positionals(cmd, pos, ['name']);
      const p = plan(cmd, values.plan);
      return async (store) => {
        process.stdout.write(`created ${describe(await store.createAccount(name, p))}`);
        return 0;
      };
    },
  },
  list: {
    usage: 'account list [--json]',
    parse(args) {
      const cmd = 'account list';
      const { values, positionals: pos } = parseCommandArgs(cmd, args, { json: { type: 'boolean' } });
      positionals(cmd, pos, []);
      return async (store) => {
        printListing(await store.listAccounts(), {
          json: values.json,
          empty: 'no accounts (create one: optmark account create <name> --plan pro)',
          header: ['NAME', 'PLAN', 'PROTECT/MONTH', 'VERIFY/MONTH', 'CREATED'],
          row: (a) => [a.name, a.plan, String(a.protectLimit), String(a.verifyLimit), a.createdAt],
        });
        return 0;
      };
    },
  },
  'set-plan': {
    usage: 'account set-plan <name> <free|pro|lifetime>',
    parse(args) {
      const cmd = 'account set-plan';
      const { values, positionals: pos } = parseCommandArgs(cmd, args, { plan: { type: 'string' } });
      // The plan may come as a second positional or as --plan, like `account create`.
      const [name, p] = values.plan === undefined ? positionals(cmd, pos, ['name', 'plan']) : [positionals(cmd, pos, ['name'])[0], values.plan];
      const checked = plan(cmd, p);
      return async (store) => {
        process.stdout.write(`updated ${describe(await store.setPlan(name, checked))}`);
        return 0;
      };
    },
  },
  'set-limits': {
    usage: 'account set-limits <name> [--protect N|default] [--verify N|default]',
    parse(args) {
      const cmd = 'account set-limits';
      const { values, positionals: pos } = parseCommandArgs(cmd, args, { protect: { type: 'string' }, verify: { type: 'string' } });
      const [name] = positionals(cmd, pos, ['name']);
      const limits = { protect: limit('--protect', values.protect), verify: limit('--verify', values.verify) };
      if (limits.protect === undefined && limits.verify === undefined) throw new UsageError(`${cmd}: give --protect and/or --verify`);
      return async (store) => {
        process.stdout.write(`updated ${describe(await store.setLimits(name, limits))}`);
        return 0;
      };
    },
  },
};

/** Entry point of `optmark account`. */
export async function main(args: string[]): Promise<number> {
  return runSubcommand('account', SUBCOMMANDS, args);
}
