// A server that answers every request, once its body has arrived, with a canned JSON body of a given
// size: what a client can measure when the server costs (almost) nothing. Used by run.sh.
//   node bench/check-ceiling/instant.cjs PORT BODY_BYTES
const http = require('node:http');
const size = Number(process.argv[3]);
const body = Buffer.from(JSON.stringify({ imageBase64: 'A'.repeat(Math.max(0, size - 120)), mimeType: 'image/jpeg', filename: 'a.jpg', sha256: '0'.repeat(64), signals: [] }));
http
  .createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  })
  .listen(Number(process.argv[2]), '127.0.0.1');
