/**
 * A port another process listens on stops the start (issue #19): uWebSockets.js listens with
 * SO_REUSEPORT by default, so a second `optmark serve` on the same port would start beside the first and
 * the kernel would split connections between them (possibly two different builds). optmark listens with
 * LIBUS_LISTEN_EXCLUSIVE_PORT unless the operator asks for sharing (OPTMARK_REUSE_PORT=1), and checks the
 * port before the slow parts of the start (store, worker pool warm-up), so the refusal comes at once.
 */
import { createServer } from 'node:net';

/** uWebSockets.js's ListenOptions (its typings declare them as a const enum the package does not export). */
export const LISTEN_DEFAULT = 0;
export const LISTEN_EXCLUSIVE_PORT = 1;

/** The configured address cannot be listened on; the message names it, why, and what to do. */
export class ListenError extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    readonly reason: string,
  ) {
    super(`cannot listen on ${host}:${port}: ${reason}`);
    this.name = 'ListenError';
  }
}

function reasonFor(code: string | undefined, port: number): string {
  switch (code) {
    case 'EADDRINUSE':
      return (
        `port ${port} is already in use by another process (another optmark serve?). Stop it, choose another port ` +
        'with OPTMARK_PORT, or set OPTMARK_REUSE_PORT=1 if several processes should share the port on purpose'
      );
    case 'EACCES':
      return `this user may not listen on port ${port} (ports below 1024 need privileges); choose another with OPTMARK_PORT`;
    case 'EADDRNOTAVAIL':
      return "the address is not one of this machine's; set OPTMARK_HOST to a local address (or 0.0.0.0)";
    default:
      return code ? `the system refused it (${code})` : 'the system refused it';
  }
}

/**
 * Binds the address exclusively for a moment with node:net to learn whether it is free, and throws a
 * ListenError saying why not. It also finds a port held by a process that shares it (SO_REUSEPORT):
 * this bind does not ask to share. Port 0 (any free port) is always free.
 */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const code = await new Promise<string | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'unknown'));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
  if (code !== undefined) throw new ListenError(host, port, reasonFor(code, port));
}

/** The error for a failed uWebSockets.js listen (it says only "no"): the probe finds the reason. */
export async function listenFailure(host: string, port: number): Promise<ListenError> {
  try {
    await checkPortFree(host, port);
  } catch (err) {
    if (err instanceof ListenError) return err;
  }
  // Free a moment later: it was taken when we tried (a race with another process), or the host is odd.
  return new ListenError(host, port, reasonFor('EADDRINUSE', port));
}
