/** `optmark serve`: starts the HTTP service on the configured address; stops on SIGTERM/SIGINT. */
import type { Command } from 'commander';
import { loadConfig, settingsHelp } from '../config.js';
import { exitWith } from './args.js';

export function register(program: Command): void {
  program
    .command('serve')
    .summary('start the HTTP service')
    .description('Start the HTTP service on OPTMARK_HOST:OPTMARK_PORT; SIGTERM or SIGINT stops it after in-flight requests.')
    .addHelpText('after', settingsHelp)
    .action(async () => {
      const config = loadConfig();
      // Loaded only here: the operator commands never pay for uWebSockets.js, sharp and the worker pool.
      const { startService } = await import('../main.js');
      // The start-up key goes to stdout only when a person reads it there, never into a collected log.
      const service = await startService(config, process.stdout.isTTY ? (text) => process.stdout.write(text) : undefined);
      await new Promise<void>((resolve) => {
        const stop = (): void => {
          process.off('SIGTERM', stop);
          process.off('SIGINT', stop);
          service.stop().then(resolve, resolve);
        };
        process.on('SIGTERM', stop);
        process.on('SIGINT', stop);
      });
      exitWith(0);
    });
}
