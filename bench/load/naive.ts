/**
 * The naive design, for side-by-side ratios (the same design as the acceptance check's naive server):
 * node:http + busboy, chunks joined with Buffer.concat, SHA-256, base64 and JSON.stringify, all on the
 * one event-loop thread. It answers every POST, whatever the path, as a protect.
 *
 *   node dist/bench/load/naive.js <port> [host]
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import busboy from 'busboy';

/** The naive answer: JSON.stringify walks a multi-megabyte base64 string (res.end then encodes it as UTF-8). */
export function naiveJson(b: Buffer): string {
  return JSON.stringify({
    imageBase64: b.toString('base64'),
    mimeType: 'image/jpeg',
    filename: 'x.jpg',
    sha256: createHash('sha256').update(b).digest('hex'),
    signals: ['iptc.dataMining'],
  });
}

export function naiveServer(): Server {
  return createServer((req, res) => {
    const bb = busboy({ headers: req.headers });
    const chunks: Buffer[] = [];
    bb.on('file', (_name, f) => f.on('data', (c: Buffer) => chunks.push(c)));
    bb.on('close', () => {
      const body = naiveJson(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    req.pipe(bb);
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.argv[2]);
  const host = process.argv[3] ?? '127.0.0.1';
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write('usage: node dist/bench/load/naive.js <port> [host]\n');
    process.exit(2);
  }
  const server = naiveServer();
  server.listen(port, host, () => {
    const addr = server.address();
    process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : port}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
