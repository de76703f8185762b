// A server that answers every request, once its body has arrived, with a canned JSON body of a given
// size: what a client can measure when the server costs (almost) nothing. Variants, still doing no work:
// "next-turn" answers one event-loop turn later (setImmediate); "optmark-headers" adds the five headers
// optmark's answer carries besides these (request id, cache, RateLimit, uWS's own). Used by run.sh.
//   node bench/check-ceiling/instant.cjs PORT BODY_BYTES [next-turn|optmark-headers]
const http = require('node:http');
const size = Number(process.argv[3]);
const nextTurn = process.argv[4] === 'next-turn';
const extra =
  process.argv[4] === 'optmark-headers'
    ? { 'X-Request-ID': 'fe1fdcfb-5e08-43c4-b056-e2bcbf6cd8ea', 'Cache-Control': 'no-store', 'RateLimit-Policy': '"protect";q=2147483648;w=2592000', RateLimit: '"protect";r=2147483524;t=750991', uWebSockets: '20' }
    : {};
const body = Buffer.from(JSON.stringify({ imageBase64: 'A'.repeat(Math.max(0, size - 120)), mimeType: 'image/jpeg', filename: 'a.jpg', sha256: '0'.repeat(64), signals: [] }));
http
  .createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, ...extra });
        res.end(body);
      };
      if (nextTurn) setImmediate(answer);
      else answer();
    });
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
