#!/usr/bin/env node
// The GIT_PROXY_COMMAND of repository scans over git:// (src/scans/sources/git.ts): git runs it as
// `git-proxy.mjs <host> <port>` and speaks the protocol over its stdin and stdout. It connects to the
// address optmark resolved and checked (OPTMARK_GIT_PROXY_ADDRESS), never to what the name resolves to
// now, refuses any other host or port, and stops the transfer past OPTMARK_GIT_PROXY_MAX_BYTES received.
import { connect } from 'node:net';

const [host, port] = process.argv.slice(2);
const address = process.env.OPTMARK_GIT_PROXY_ADDRESS;
const maxBytes = Number(process.env.OPTMARK_GIT_PROXY_MAX_BYTES ?? 'Infinity');
if (!address || host !== process.env.OPTMARK_GIT_PROXY_HOST || port !== process.env.OPTMARK_GIT_PROXY_PORT) {
  process.stderr.write(`optmark git proxy: refusing ${host}:${port} (not the checked address)\n`);
  process.exit(1);
}
const socket = connect({ host: address, port: Number(port) });
let received = 0;
socket.on('data', (chunk) => {
  received += chunk.length;
  if (received > maxBytes) {
    process.stderr.write(`optmark git proxy: the transfer passed the scan's byte limit of ${maxBytes}\n`);
    process.exit(3);
  }
  if (!process.stdout.write(chunk)) {
    socket.pause();
    process.stdout.once('drain', () => socket.resume());
  }
});
socket.on('end', () => process.stdout.end());
socket.on('error', (err) => {
  process.stderr.write(`optmark git proxy: ${err.message}\n`);
  process.exit(1);
});
socket.on('close', () => process.stdout.end(() => process.exit(0)));
process.stdin.pipe(socket);
