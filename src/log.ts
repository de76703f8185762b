/**
 * Structured JSON logs (pino). One root logger per process; modules take children with their own
 * bindings. Authorization headers and keys are redacted wherever they would appear.
 *
 * Lines are written to standard output synchronously, one write each, as Node writes process.stdout to a
 * file or a pipe on Linux: pino's default (an asynchronous write on libuv's thread pool per line) cost the
 * event loop a hand-off, a wake-up and a callback for every request's line, held lines in memory without
 * bound behind a slow reader, and lost them on a crash.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

const REDACT = ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', 'apiKey', 'privateKey', 'secret'];

export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid, ...bindings },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.destination({ dest: 1, sync: true }),
  );
}
