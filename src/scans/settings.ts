/**
 * The scan settings (docs/scans.md, docs/configuration.md): the daily scan limits, each per-scan limit
 * (DEFAULT_SCAN_LIMITS), the networks a scan may reach, and whether the server takes local sources.
 * Spread into SETTINGS in src/config.ts.
 */
import type { Config } from '../config.js';
import { Invalid, type Parser, type Setting, onOff, setting, wholeNumber } from '../settings-kit.js';
import { DEFAULT_SCAN_LIMITS, MAX_PER_HOST_DELAY_MS } from './limits.js';
import { parseNetworks } from './net/address.js';

const networks: Parser<string[]> = (raw) => {
  try {
    return parseNetworks(raw);
  } catch (err) {
    throw new Invalid((err as Error).message);
  }
};

function limit<K extends keyof Config>(variable: string, key: K, value: number, min: number, max: number, doc: string): Setting<K> {
  return setting({ variable, key, shown: String(value), fallback: () => value as Config[K], parse: wholeNumber(min, max) as Parser<Config[K]>, doc });
}

const d = DEFAULT_SCAN_LIMITS;

export const SCAN_SETTINGS: readonly Setting[] = [
  limit(
    'OPTMARK_SCAN_DAILY_LIMIT',
    'scanDailyLimit',
    10,
    0,
    1_000_000,
    'Scans one account may start per UTC day; past it POST /api/v1/scans answers 429 scan_limit_exceeded.',
  ),
  limit(
    'OPTMARK_SCAN_SERVICE_DAILY_LIMIT',
    'scanServiceDailyLimit',
    250,
    0,
    100_000_000,
    'Scans the whole service starts per UTC day; past it new scans are accepted paused and start, oldest first, when the day resets.',
  ),
  limit('OPTMARK_SCAN_MAX_IMAGES', 'scanMaxImages', d.maxImages, 1, 10_000_000, 'Images one scan examines at most.'),
  limit(
    'OPTMARK_SCAN_MAX_BYTES',
    'scanMaxBytes',
    d.maxBytes,
    1024,
    1024 ** 4,
    'Bytes one scan fetches or reads in all (pages, manifests, archives, clones, images).',
  ),
  limit(
    'OPTMARK_SCAN_MAX_WALL_MS',
    'scanMaxWallMs',
    d.maxWallMs,
    1000,
    7 * 24 * 3600_000,
    "A scan's wall time; past it the scan fails `timeout`, keeping what it found.",
  ),
  limit(
    'OPTMARK_SCAN_MAX_IMAGE_BYTES',
    'scanMaxImageBytes',
    d.maxImageBytes,
    1024,
    1024 ** 3,
    'Largest image a scan reads; a larger one is an item failed `too_large`.',
  ),
  limit('OPTMARK_SCAN_MAX_REDIRECTS', 'scanMaxRedirects', d.maxRedirects, 0, 20, 'Redirects a scan follows for one fetch.'),
  limit('OPTMARK_SCAN_PER_HOST_CONCURRENCY', 'scanPerHostConcurrency', d.perHostConcurrency, 1, 64, 'Requests one scan has open to one host at once.'),
  limit(
    'OPTMARK_SCAN_PER_HOST_DELAY_MS',
    'scanPerHostDelayMs',
    d.perHostDelayMs,
    0,
    MAX_PER_HOST_DELAY_MS,
    "Pause between one scan's requests to one host (a scan's options may raise it, never lower it).",
  ),
  setting({
    variable: 'OPTMARK_SCAN_ALLOW_NETWORKS',
    key: 'scanAllowNetworks',
    shown: '',
    fallback: () => [],
    parse: networks,
    doc: 'CIDR list of networks a scan may reach although private, loopback or link-local (none by default).',
  }),
  setting({
    variable: 'OPTMARK_SCAN_ALLOW_LOCAL',
    key: 'scanAllowLocal',
    shown: 'off',
    fallback: () => false,
    parse: onOff,
    doc: "Let the server's scans read local folders, files and file:// URLs (the server's own file system).",
  }),
  limit(
    'OPTMARK_SCAN_CLOCK_OFFSET_MS',
    'scanClockOffsetMs',
    0,
    0,
    100 * 365 * 24 * 3600_000,
    "Moves the scans' clock (daily counts, wall time) this far ahead of the system's: for tests of the UTC day boundary; leave 0.",
  ),
];
