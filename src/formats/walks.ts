/**
 * A watch on container walks, for tests that check each request walks its file once (src/formats/types.ts).
 * Unwatched, a walk pays one call and a branch.
 */
let watcher: ((bytes: Uint8Array) => void) | undefined;

/** Calls `fn` with the bytes of every container walk until the returned function is called. */
export function watchWalks(fn: (bytes: Uint8Array) => void): () => void {
  watcher = fn;
  return () => {
    if (watcher === fn) watcher = undefined;
  };
}

/** Called by each container module's walk (jpeg, png, webp `parse`). */
export function walked(bytes: Uint8Array): void {
  watcher?.(bytes);
}
