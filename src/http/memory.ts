/**
 * The arena ranges one request holds (its upload, its response body), and when they may go back. A
 * range a worker may still touch is never freed early: after a normal answer from the worker it is
 * freed at once; after an aborted task (deadline), only once the terminated worker is surely gone.
 */
import type { Arena, Slot } from '../pool/arena.js';

/** How long the ranges of an aborted task stay out of use while its worker is torn down. */
export const QUARANTINE_MS = 5_000;

export class RequestMemory {
  readonly #arena: Arena;
  readonly #changed: () => void;
  readonly #slots = new Set<Slot>();
  #workerHasThem = false;
  #releaseWhenBack = false;

  constructor(arena: Arena, changed: () => void) {
    this.#arena = arena;
    this.#changed = changed;
  }

  /** A new range of at least `bytes`, or undefined when the arena is full. */
  take(bytes: number): Slot | undefined {
    const slot = this.#arena.alloc(bytes);
    if (slot) {
      this.#slots.add(slot);
      this.#changed();
    }
    return slot;
  }

  /** Keeps only the first `bytes` of a range it holds. */
  shrink(slot: Slot, bytes: number): Slot {
    const kept = this.#arena.shrink(slot, bytes);
    this.#slots.delete(slot);
    this.#slots.add(kept);
    this.#changed();
    return kept;
  }

  /** Gives one range back now (it must not be in a worker's hands). */
  free(slot: Slot): void {
    if (!this.#slots.delete(slot)) return;
    this.#arena.free(slot);
    this.#changed();
  }

  view(slot: Slot, length?: number): Uint8Array {
    return this.#arena.view(slot, length);
  }

  /** The ranges are now in a worker's hands. */
  lend(): void {
    this.#workerHasThem = true;
  }

  /** The worker gave an answer (normally), or its task was aborted and the worker is being replaced. */
  returned(normally: boolean): void {
    this.#workerHasThem = false;
    if (!normally) {
      const slots = [...this.#slots];
      this.#slots.clear();
      setTimeout(() => {
        for (const s of slots) this.#arena.free(s);
        this.#changed();
      }, QUARANTINE_MS).unref();
      return;
    }
    if (this.#releaseWhenBack) this.releaseAll();
  }

  /** Gives every range back, or as soon as the worker has returned them. */
  releaseAll(): void {
    if (this.#workerHasThem) {
      this.#releaseWhenBack = true;
      return;
    }
    if (this.#slots.size === 0) return;
    for (const s of this.#slots) this.#arena.free(s);
    this.#slots.clear();
    this.#changed();
  }
}
