/**
 * The S3 API server of the tests (s3rver), run in a process of its own by ./s3-server.ts:
 * `node --openssl-legacy-provider s3-server-child.cjs <directory> <bucket>...`; prints `{"port":N}` once
 * it listens on 127.0.0.1 (a port of its own), and stops on SIGTERM.
 *
 * One fix of s3rver 3.7.1 itself: its putObject answers when the bytes have passed its hashing step, before
 * the file holding them is written and closed, so a GET right after a PUT can read a short object. Here
 * putObject waits for the file to be closed (stream.pipeline) before answering.
 */
'use strict';
const crypto = require('node:crypto');
const { pipeline } = require('node:stream/promises');
const { Transform } = require('node:stream');
const fs = require('fs-extra');
const path = require('node:path');
const S3rver = require('s3rver');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.mkdirp(path.dirname(objectPath));
  const md5 = crypto.createHash('md5');
  let size = 0;
  const source = Buffer.isBuffer(object.content) ? [object.content] : object.content;
  await pipeline(
    source,
    new Transform({
      transform(chunk, encoding, callback) {
        md5.update(chunk, encoding);
        size += chunk.length;
        callback(null, chunk);
      },
    }),
    fs.createWriteStream(objectPath),
  );
  const digest = md5.digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, digest);
  return { size, md5: digest };
};

const [directory, ...buckets] = process.argv.slice(2);
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory,
  configureBuckets: buckets.map((name) => ({ name, configs: [] })),
});
server.run().then(
  (address) => process.stdout.write(`${JSON.stringify({ port: address.port })}\n`),
  (err) => {
    process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  },
);
process.on('SIGTERM', () => process.exit(0));
