/** A request id: the client's X-Request-ID when it is short and plain, otherwise a fresh UUID. */
export function requestId(incoming: string, fresh: () => string): string {
  return /^[A-Za-z0-9._:@-]{1,128}$/.test(incoming) ? incoming : fresh();
}
