// What the scan source tests share: a ScanContext over a temporary folder (no fetcher: these sources
// never fetch over HTTP), what it was told was skipped, and a source's candidates read out.
import { DEFAULT_SCAN_LIMITS, lowered } from '../../src/scans/limits.js';
import { AddressPolicy } from '../../src/scans/net/address.js';
import type { Fetcher, OpenedSource, ScanContext, ScanLimits } from '../../src/scans/types.js';

export interface Skip {
  location: string;
  code: string;
}

/** A fetcher for sources that must not fetch: any use fails the test. */
const NO_FETCHER: Fetcher = {
  get: () => Promise.reject(new Error('this source must not fetch over HTTP')),
  stream: () => Promise.reject(new Error('this source must not fetch over HTTP')),
  servedSignals: () => Promise.reject(new Error('this source must not fetch over HTTP')),
  bytes: 0,
  close: () => undefined,
};

export function scanContext(
  folder: string,
  options: { limits?: Partial<ScanLimits>; allow?: string[]; allowLocal?: boolean; signal?: AbortSignal } = {},
): { ctx: ScanContext; skipped: Skip[] } {
  const skipped: Skip[] = [];
  const ctx: ScanContext = {
    fetcher: NO_FETCHER,
    limits: lowered(DEFAULT_SCAN_LIMITS, options.limits ?? {}),
    folder,
    allowLocal: options.allowLocal ?? true,
    followLinks: false,
    signal: options.signal ?? new AbortController().signal,
    policy: new AddressPolicy(options.allow ?? []),
    skipped: (location, code) => skipped.push({ location, code }),
  };
  return { ctx, skipped };
}

export interface Read {
  index: number;
  location: string;
  bytes?: Buffer;
  error?: string;
}

/** Every candidate from `from`, loaded (a load's failure as its code). */
export async function readAll(source: OpenedSource, from = 0): Promise<Read[]> {
  const out: Read[] = [];
  for await (const c of source.candidates(from)) {
    try {
      const { bytes } = await c.load();
      out.push({ index: c.index, location: c.location, bytes: Buffer.from(bytes) });
    } catch (err) {
      out.push({ index: c.index, location: c.location, error: (err as { code?: string }).code ?? String(err) });
    }
  }
  return out;
}

/** The code of what `p` rejects with. */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
  return 'resolved';
}
