/**
 * A TCP relay to PostgreSQL that a test controls: it passes bytes, refuses connections, or swallows
 * everything (a black hole: bytes go in, nothing comes back). Switching mode cuts every open connection
 * abruptly (no error message from the database first, as when a network or the server goes away).
 * `deafen()` instead keeps the connections and passes what the client sends, swallowing only what the
 * database answers: a statement then runs and its answer is lost when the connection is cut next.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type RelayMode = 'pass' | 'refuse' | 'blackhole' | 'deaf';

/** Does `tail` end with PostgreSQL's ReadyForQuery message ('Z', length 5, status I/T/E): the end of every answer? */
function endsReady(tail: Buffer): boolean {
  const at = tail.length - 6;
  return at >= 0 && tail[at] === 0x5a && tail.readUInt32BE(at + 1) === 5 && 'ITE'.includes(String.fromCharCode(tail[at + 5]!));
}

export class Relay {
  mode: RelayMode = 'pass';
  port = 0;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  /** The last bytes swallowed in mode 'deaf'. */
  #swallowed = Buffer.alloc(0);

  constructor(
    readonly host: string,
    readonly upstreamPort: number,
  ) {}

  /** A relay to the database of `url` (listening); `via(url)` is the same URL through the relay. */
  static async to(url: string): Promise<Relay> {
    const u = new URL(url);
    const relay = new Relay(u.hostname, Number(u.port || 5432));
    await relay.listen();
    return relay;
  }

  /** `url` with its host and port those of the relay. */
  via(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.href;
  }

  async listen(): Promise<void> {
    this.#server = createServer((client) => {
      if (this.mode === 'refuse') return client.destroy();
      this.#track(client);
      const up = connect(this.upstreamPort, this.host);
      this.#track(up);
      client.on('data', (d) => (this.mode === 'pass' || this.mode === 'deaf') && up.write(d));
      up.on('data', (d) => {
        if (this.mode === 'pass') client.write(d);
        else if (this.mode === 'deaf') this.#swallowed = Buffer.concat([this.#swallowed, d]).subarray(-16);
      });
      const end = () => {
        client.destroy();
        up.destroy();
      };
      client.on('close', end).on('error', end);
      up.on('close', end).on('error', end);
    });
    await new Promise<void>((res) => this.#server!.listen(this.port, '127.0.0.1', () => res()));
    this.port = (this.#server.address() as { port: number }).port;
  }

  #track(s: Socket): void {
    this.#sockets.add(s);
    s.on('close', () => this.#sockets.delete(s));
  }

  /** Passes on what clients send and swallows the answers, without cutting anything (see `answered`). */
  deafen(): void {
    this.mode = 'deaf';
    this.#swallowed = Buffer.alloc(0);
  }

  /** In mode 'deaf': has the database finished an answer (swallowed) since `deafen()`? */
  answered(): boolean {
    return endsReady(this.#swallowed);
  }

  /** Switches mode; every open connection is cut (the pool must connect again, into the new mode). */
  set(mode: RelayMode): void {
    this.mode = mode;
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.set('refuse');
    await new Promise((res) => this.#server?.close(res));
  }
}
