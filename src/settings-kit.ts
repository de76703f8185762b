/**
 * The pieces every settings table is built from (src/config.ts's SETTINGS, and the tables of the
 * capabilities that keep theirs beside their code): the entry's shape and the common parsers. A parser
 * throws Invalid with a message; loadConfig names the variable.
 */
import { resolve } from 'node:path';
import type { Config } from './config.js';

/** The settings loaded so far (the table is loaded in order; a default or a bound may use earlier ones). */
export type Earlier = Partial<Config>;

/** A parser: the trimmed raw value (and the settings before it) to the value, or throws a message. */
export type Parser<T> = (raw: string, earlier: Earlier) => T;

export interface Setting<K extends keyof Config = keyof Config> {
  /** The environment variable. */
  variable: string;
  key: K;
  /** The default, as --help and the document show it. */
  shown: string;
  /** The default's value (it may depend on the machine or on earlier settings). */
  fallback: (earlier: Earlier) => Config[K];
  parse: Parser<Config[K]>;
  /** One line: what it does. */
  doc: string;
}

export class Invalid extends Error {}

/** A whole number within bounds (a bound may depend on earlier settings). */
export function wholeNumber(min: number, max: number | ((earlier: Earlier) => number)): Parser<number> {
  return (raw, earlier) => {
    if (!/^\d+$/.test(raw)) throw new Invalid(`expected a whole number, got ${JSON.stringify(raw)}`);
    const n = Number(raw);
    const hi = typeof max === 'number' ? max : max(earlier);
    if (!Number.isSafeInteger(n) || n < min || n > hi) throw new Invalid(`must be between ${min} and ${hi}, got ${raw}`);
    return n;
  };
}

export const onOff: Parser<boolean> = (raw) => {
  const v = raw.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new Invalid(`expected on/off (1/0, true/false), got ${JSON.stringify(raw)}`);
};

export const path: Parser<string> = (raw) => resolve(raw);

/** Declares one setting (keeps each entry's types tied to its key). */
export function setting<K extends keyof Config>(s: Setting<K>): Setting<K> {
  return s;
}
