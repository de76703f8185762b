/**
 * The scan runner of `optmark serve` (docs/scans.md "Jobs"): on every instance, a loop that starts paused
 * scans when the service's day allows, takes a chunk under a lease (./store.ts claim), and works it:
 *
 *   open the source in a temporary folder of the chunk's own ──> candidates(k * CHUNK_SIZE) ──>
 *   each analysed (verify on the worker pool, at most `width` at once) ──> the chunk's items, counts and
 *   completion in one transaction (./store.ts complete)
 *
 * The lease is renewed while the chunk is worked; an instance killed mid-chunk loses only that chunk's
 * lease, and the instance that takes it over writes the items the first did not (one row per index).
 * Chunk k+1 is made the moment the enumeration passes the end of chunk k, so other instances can work it
 * meanwhile. Between items the runner looks at the scan's state: a cancelled scan stops there.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../log.js';
import type { Store } from '../../store/index.js';
import { type AnalyseDeps, analyseCandidate, errorOf, type ScanVerifyReport } from '../analyse.js';
import { lowered } from '../limits.js';
import { AddressPolicy } from '../net/address.js';
import type { Fetcher, OpenedSource, ScanContext, ScanItem, ScanLimits } from '../types.js';
import { CHUNK_SIZE, type ChunkEnd, type ClaimedChunk, type IndexedItem } from './store.js';

export const SCAN_USER_AGENT = 'optmark-scan/1.0 (+https://github.com/optmark/optmark/blob/main/docs/scans.md)';

export interface RunnerOptions {
  store: Store;
  log: Logger;
  /** Verify's report of `bytes`; with `perceptualHash`, its PDQ hash too (the account keeps vault originals). */
  verify(bytes: Uint8Array, perceptualHash: boolean): Promise<ScanVerifyReport>;
  /** The server's per-scan limits (a scan's options lower them). */
  limits: ScanLimits;
  serviceDailyLimit: number;
  allowNetworks: string[];
  allowLocal: boolean;
  /** Verifies of this instance's scans in flight at once (room kept for protect and verify). */
  width: number;
  /** Is the pool busy with requests? Then scan work waits. */
  busy(): boolean;
  /** The clock (epoch ms); tests move it across UTC midnight. */
  now?: () => number;
  leaseMs?: number;
  pollMs?: number;
  /** Chunks this instance works at once. */
  chunks?: number;
  /** Told of each item written and of each scan's failure (the metrics). */
  onItems?(count: number): void;
  onFailed?(code: string): void;
}

const DEFAULT_LEASE_MS = 15_000;
const DEFAULT_POLL_MS = 500;
const BUSY_WAIT_MS = 10;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class ScanRunner {
  readonly owner = `scan-${randomUUID()}`;
  readonly #o: RunnerOptions;
  readonly #now: () => number;
  readonly #leaseMs: number;
  readonly #stop = new AbortController();
  readonly #working = new Set<Promise<void>>();
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #inflight = 0;

  constructor(options: RunnerOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Looks for work now (a scan was just created). */
  poke(): void {
    this.#wake?.();
  }

  /** Stops taking chunks and stops the ones in progress between items (their leases run out). */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.#loop;
    await Promise.allSettled([...this.#working]);
  }

  async #run(): Promise<void> {
    const max = this.#o.chunks ?? 1;
    while (!this.#stop.signal.aborted) {
      try {
        await this.#o.store.scans.resumePaused(this.#now(), this.#o.serviceDailyLimit);
        while (this.#working.size < max && !this.#stop.signal.aborted) {
          const claimed = await this.#o.store.scans.claim(this.owner, this.#now(), this.#leaseMs);
          if (!claimed) break;
          const p = this.#chunk(claimed).finally(() => this.#working.delete(p));
          this.#working.add(p);
        }
      } catch (err) {
        this.#o.log.warn({ err }, 'scan runner: the store did not answer');
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.#o.pollMs ?? DEFAULT_POLL_MS);
        this.#wake = () => {
          clearTimeout(t);
          resolve();
        };
        if (this.#working.size > 0) void Promise.race([...this.#working]).then(() => this.#wake?.());
      });
    }
  }

  async #chunk({ scan, k }: ClaimedChunk): Promise<void> {
    const { store, log } = this.#o;
    const folder = await mkdtemp(join(tmpdir(), `optmark-scan-${scan.id.slice(0, 8)}-`));
    const abort = new AbortController();
    const stopped = (): void => abort.abort();
    this.#stop.signal.addEventListener('abort', stopped);
    let lost = false;
    const renew = setInterval(
      () => {
        store.scans.renew(this.owner, scan.id, k, this.#now(), this.#leaseMs).then(
          (held) => {
            if (!held) {
              lost = true;
              abort.abort();
            }
          },
          () => undefined,
        );
      },
      Math.max(50, Math.floor(this.#leaseMs / 3)),
    );
    const items: IndexedItem[] = [];
    let end: ChunkEnd | undefined;
    let opened: OpenedSource | undefined;
    let fetcher: Fetcher | undefined;
    try {
      const limits = lowered(this.#o.limits, scan.options);
      fetcher = await this.#fetcher(limits, abort.signal);
      const ctx: ScanContext = {
        fetcher,
        limits,
        folder,
        allowLocal: this.#o.allowLocal,
        followLinks: scan.options.followLinks === true,
        signal: abort.signal,
        policy: new AddressPolicy(this.#o.allowNetworks),
        skipped: () => undefined,
      };
      // The account's vault is searched only when it keeps originals: hashing every picture costs a decode.
      const searchVault = (await store.vault.state(scan.accountId)).objects > 0;
      const deps: AnalyseDeps = {
        verify: (bytes) => this.#verify(bytes, searchVault),
        ...(searchVault ? { vaultOf: (hash: string) => store.vault.vaultMatches(scan.accountId, hash) } : {}),
        recordOf: async (sha) => {
          const r = await store.dashboard.recordBySha256(scan.accountId, sha);
          return r ? { id: r.id, createdAt: r.markedAt } : null;
        },
      };
      const first = k * CHUNK_SIZE;
      const last = Math.min((k + 1) * CHUNK_SIZE, limits.maxImages);
      const started = scan.startedAt ?? this.#now();
      const { openSource } = await import('../sources/index.js');
      opened = await openSource(scan.source, ctx, scan.options.type);
      const window: Promise<IndexedItem>[] = [];
      const take = async (): Promise<void> => {
        items.push(await window.shift()!);
      };
      for await (const c of opened.candidates(first)) {
        if (c.index >= last) {
          if (c.index < limits.maxImages) await store.scans.addChunk(scan.id, k + 1);
          break;
        }
        if (abort.signal.aborted || (await store.scans.stateOf(scan.id)) !== 'running') break;
        if (this.#now() - started > limits.maxWallMs) {
          end = { state: 'failed', error: { code: 'timeout', message: `the scan ran past its wall-time limit (${limits.maxWallMs} ms)` } };
          break;
        }
        window.push(analyseCandidate(c, deps).then((item: ScanItem) => ({ index: c.index, item })));
        if (window.length >= this.#o.width) await take();
      }
      while (window.length > 0) await take();
    } catch (err) {
      end = { state: 'failed', error: errorOf(err) };
    } finally {
      clearInterval(renew);
      this.#stop.signal.removeEventListener('abort', stopped);
      await opened?.close().catch(() => undefined);
      fetcher?.close();
      await rm(folder, { recursive: true, force: true }).catch(() => undefined);
    }
    // Stopped by shutdown or a lost lease: nothing is written; the chunk's next holder does it all.
    if (lost || this.#stop.signal.aborted) return;
    try {
      if (await store.scans.complete(this.owner, scan.id, k, items, this.#now(), end)) {
        this.#o.onItems?.(items.length);
        if (end) this.#o.onFailed?.(end.error.code);
      }
    } catch (err) {
      log.warn({ err, scan: scan.id, chunk: k }, 'scan runner: a chunk could not be written; its lease will run out and it is taken again');
    }
  }

  /** A verify on the pool, only while its workers have room for requests first. */
  async #verify(bytes: Uint8Array, perceptualHash: boolean): Promise<ScanVerifyReport> {
    while (this.#o.busy() || this.#inflight >= this.#o.width) await sleep(BUSY_WAIT_MS);
    this.#inflight++;
    try {
      return await this.#o.verify(bytes, perceptualHash);
    } finally {
      this.#inflight--;
    }
  }

  async #fetcher(limits: ScanLimits, signal: AbortSignal): Promise<Fetcher> {
    const { createFetcher } = await import('../net/fetcher.js');
    return createFetcher({ limits, policy: new AddressPolicy(this.#o.allowNetworks), signal, userAgent: SCAN_USER_AGENT });
  }
}
