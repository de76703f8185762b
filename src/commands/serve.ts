/** `optmark serve`: starts the HTTP service on the configured address; stops on SIGTERM/SIGINT. */
import { loadConfig } from '../config.js';
import { startService } from '../main.js';
import { parseCommandArgs } from './args.js';

export async function main(args: string[]): Promise<number> {
  parseCommandArgs('serve', args, {});
  const config = loadConfig();
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
  return 0;
}
