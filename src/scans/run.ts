/**
 * A scan of one or more sources run to its end in this process (`optmark scan`, bench/scan.bench.ts):
 * each source opened (./sources/index.ts), its candidates analysed (./analyse.ts) with up to `width` in
 * flight, the items handed on in the source's order, counted. A source that fails (a refused address,
 * a clone past the byte limit, a cut archive) ends that source, with its code; the scan goes on to the next.
 */
import { type AnalyseDeps, addToCounts, analyseCandidate, emptyCounts } from './analyse.js';
import { openSource, type SourceType } from './sources/index.js';
import type { ScanContext, ScanCounts, ScanItem } from './types.js';

export interface ScanRun {
  sources: string[];
  type?: SourceType | undefined;
  ctx: ScanContext;
  deps: AnalyseDeps;
  /** Candidates analysed at once (the verify lanes' width). */
  width: number;
  /** Every item, in each source's order. */
  onItem(item: ScanItem): void;
}

export interface ScanOutcome {
  counts: ScanCounts;
  /** Sources that failed, with the stable code and message. */
  failed: { source: string; code: string; message: string }[];
  /** The image limit (ctx.limits.maxImages) stopped the scan. */
  stoppedAtLimit: boolean;
}

export async function runScan(run: ScanRun): Promise<ScanOutcome> {
  const counts = emptyCounts();
  const failed: ScanOutcome['failed'] = [];
  let items = 0;
  let stoppedAtLimit = false;
  const { ctx } = run;
  for (const source of run.sources) {
    if (ctx.signal.aborted || stoppedAtLimit) break;
    const window: Promise<ScanItem>[] = [];
    const emit = async (): Promise<void> => {
      const item = await window.shift()!;
      addToCounts(counts, item);
      run.onItem(item);
    };
    let opened;
    try {
      opened = await openSource(source, ctx, run.type);
      for await (const c of opened.candidates(0)) {
        if (ctx.signal.aborted) break;
        if (items >= ctx.limits.maxImages) {
          stoppedAtLimit = true;
          break;
        }
        items++;
        window.push(analyseCandidate(c, run.deps));
        if (window.length >= run.width) await emit();
      }
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      failed.push({ source, code: typeof e.code === 'string' ? e.code : 'internal_error', message: typeof e.message === 'string' ? e.message : String(err) });
    } finally {
      while (window.length > 0) await emit();
      await opened?.close();
    }
  }
  return { counts, failed, stoppedAtLimit };
}
