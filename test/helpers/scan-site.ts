/**
 * A real HTTP server on loopback for the scan tests: routes by path, each a function of the request that
 * writes the answer, a log of every request it received (so a test can say "no byte reached it") and a
 * count of the connections it accepted (keep-alive).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: IncomingMessage, res: ServerResponse) => void;

export class ScanSite {
  readonly requests: string[] = [];
  /** TCP connections accepted, and how many of them are still open. */
  connections = 0;
  open = 0;
  readonly routes = new Map<string, Route>();
  #server: Server | undefined;
  port = 0;
  host = '127.0.0.1';

  static async start(host = '127.0.0.1'): Promise<ScanSite> {
    const site = new ScanSite();
    site.host = host;
    site.#server = createServer((req, res) => {
      site.requests.push(req.url ?? '');
      const route = site.routes.get((req.url ?? '').split('?')[0]!);
      if (route) route(req, res);
      else {
        res.statusCode = 404;
        res.end('not found');
      }
    });
    site.#server.on('connection', (socket) => {
      site.connections++;
      site.open++;
      socket.once('close', () => site.open--);
    });
    await new Promise<void>((r) => site.#server!.listen(0, host, r));
    site.port = (site.#server.address() as AddressInfo).port;
    return site;
  }

  url(path: string): string {
    return `http://${this.host}:${this.port}${path}`;
  }

  /** Serves `body` at `path` with `headers`. */
  file(path: string, body: string | Buffer, headers: Record<string, string> = {}): void {
    this.routes.set(path, (_req, res) => {
      for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
      res.end(body);
    });
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => this.#server?.close(() => r()) ?? r());
  }
}
