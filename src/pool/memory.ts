/**
 * A worker's memory as the pool bounds it (OPTMARK_WORKER_MEMORY_LIMIT_BYTES): the JavaScript heap in
 * use plus the C2PA reader's wasm memory. The wasm memory is the part that matters: it grows to whatever
 * the reader once needed and never shrinks, so one hostile file can leave a worker holding gigabytes for
 * good; the pool replaces a worker whose report passed the limit (src/pool/pool.ts). Request bodies live
 * in the shared transfer memory, counted by the in-flight budget, not here.
 */
import { getHeapStatistics } from 'node:v8';
import { c2paMemoryBytes } from '../c2pa/reader.js';

/** This thread's memory: heap in use and the reader's wasm memory. One call costs about a microsecond. */
export function workerMemoryBytes(): number {
  return getHeapStatistics().used_heap_size + c2paMemoryBytes();
}
