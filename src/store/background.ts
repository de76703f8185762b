/**
 * The store's background work, for both engines: tasks on intervals that never overlap themselves (a
 * slow database does not pile them up) and report their failures by name instead of throwing.
 */
import type { BackgroundOptions } from './types.js';

export class BackgroundTimers {
  #timers: NodeJS.Timeout[] = [];
  readonly #onError: BackgroundOptions['onError'];

  constructor(options: BackgroundOptions = {}) {
    this.#onError = options.onError;
  }

  /** Runs `fn` now (awaited), reporting a failure as `what`. */
  async run(what: string, fn: () => unknown): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.report(what, err);
    }
  }

  /** Runs `fn` every `ms` (not while its previous run is still going). */
  every(ms: number, what: string, fn: () => unknown): void {
    let running = false;
    const t = setInterval(() => {
      if (running) return;
      running = true;
      void this.run(what, fn).finally(() => (running = false));
    }, ms);
    t.unref();
    this.#timers.push(t);
  }

  report(what: string, err: unknown): void {
    this.#onError?.(err instanceof Error ? err : new Error(String(err)), what);
  }

  get running(): boolean {
    return this.#timers.length > 0;
  }

  stop(): void {
    for (const t of this.#timers.splice(0)) clearInterval(t);
  }
}
