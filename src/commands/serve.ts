/** `optmark serve`: starts the HTTP service on the configured address; stops on SIGTERM/SIGINT. */
import type { Command } from 'commander';
import { CONFIG_DOC, loadConfig } from '../config.js';
import { exitWith } from './args.js';

/** The settings `serve` reads, one per line, for its --help. */
function settingsHelp(): string {
  const width = Math.max(...CONFIG_DOC.map(([name]) => name.length));
  const lines = CONFIG_DOC.map(([name, fallback, meaning]) => `  ${name.padEnd(width)}  ${meaning} (default: ${fallback})`);
  return `\nSettings (environment variables; docs/configuration.md has the details):\n${lines.join('\n')}\n`;
}

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
      const service = await startService(config, (text) => process.stdout.write(text));
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
