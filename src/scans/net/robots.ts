/**
 * robots-parser (RFC 9309, wildcards), loaded as the CommonJS module it is: its typings declare an ES
 * default export that Node's ESM loader does not give a CommonJS module.
 */
import { createRequire } from 'node:module';

export interface Robots {
  isAllowed(url: string, ua?: string): boolean | undefined;
  isDisallowed(url: string, ua?: string): boolean | undefined;
}

export const parseRobots = createRequire(import.meta.url)('robots-parser') as (url: string, text: string) => Robots;
