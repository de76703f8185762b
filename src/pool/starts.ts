/**
 * When a worker started a task, in shared memory: the pool's time limit counts from a task's start, and a
 * message per task to say so cost the event-loop thread a wake-up, a message read and a handler for every
 * request. The worker stamps a slot instead (its thread id and the time, then the task's token), and the
 * pool reads the slot when its timer fires.
 *
 * A task's slot is its token modulo the ring's size, which is at least four times the tasks the pool holds
 * at once; the token written last says whose stamp it is, so a late stamp by a worker being terminated for
 * an older task can neither pass for a newer task's start nor land on a slot in use.
 */

/** The shared ring: [token, threadId] per slot, then the start time (ms since the epoch) per slot. */
export class TaskStarts {
  readonly buffer: SharedArrayBuffer;
  readonly #ids: Int32Array;
  readonly #times: Float64Array;
  readonly #mask: number;

  /** `tasks`: the most tasks pending at once (the ring is larger), or a buffer made by another thread. */
  constructor(tasks: number | SharedArrayBuffer) {
    let slots: number;
    if (typeof tasks === 'number') {
      slots = 256;
      while (slots < 4 * tasks) slots *= 2;
      this.buffer = new SharedArrayBuffer(slots * 16);
    } else {
      this.buffer = tasks;
      slots = tasks.byteLength / 16;
    }
    this.#mask = slots - 1;
    this.#ids = new Int32Array(this.buffer, 0, slots * 2);
    this.#times = new Float64Array(this.buffer, slots * 8, slots);
  }

  /** In the worker, as it starts the task with `token`. */
  stamp(token: number, threadId: number): void {
    const slot = token & this.#mask;
    this.#times[slot] = Date.now();
    this.#ids[2 * slot + 1] = threadId;
    // The token last: a reader that sees it sees the thread and the time too.
    Atomics.store(this.#ids, 2 * slot, token);
  }

  /** In the pool: the thread and time that started the task with `token`, or undefined while it waits. */
  started(token: number): { threadId: number; at: number } | undefined {
    const slot = token & this.#mask;
    if (Atomics.load(this.#ids, 2 * slot) !== (token | 0)) return undefined;
    return { threadId: this.#ids[2 * slot + 1]!, at: this.#times[slot]! };
  }
}
