/**
 * Structured JSON logs (pino). One root logger per process; modules take children with their own
 * bindings. Authorization headers and keys are redacted wherever they would appear.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

const REDACT = ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', 'apiKey', 'privateKey', 'secret'];

export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
