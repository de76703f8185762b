/**
 * Issue #20 points 1 to 3 through a real server: a PNG of 64 compressed XMP packets of 16 MiB each
 * cannot raise the server's memory by gigabytes (it rose by 3.7 GB before), and protect answers such
 * files with a stable code instead of a 16 MB image verify refuses.
 */
import { readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pngChunk, pngWith } from '../helpers/containers.js';
import { FixtureSet, NS } from '../helpers/fixtures.js';
import { TestServer, api, imageForm } from '../helpers/server.js';

const MiB = 1024 * 1024;

function compressedXmpChunk(size: number): Buffer {
  const pre = Buffer.from(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="${NS.rdf}"><rdf:Description rdf:about="" xmlns:plus="${NS.plus}" plus:Z="`);
  const post = Buffer.from('"/></rdf:RDF></x:xmpmeta>');
  const x = Buffer.concat([pre, Buffer.alloc(size - pre.length - post.length, 0x41), post]);
  return pngChunk('iTXt', Buffer.concat([Buffer.from('XML:com.adobe.xmp\0\x01\x00\0\0', 'latin1'), deflateSync(x, { level: 9 })]));
}

const rss = (pid: number): number => Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * 4096;

const fx = new FixtureSet();
let server: TestServer;
let key: string;
let png: Buffer;
beforeAll(async () => {
  png = await fx.bytes('base.png');
  server = await TestServer.start();
  ({ key } = await server.account({ protect: 1000, verify: 1000 }));
});
afterAll(async () => {
  await server?.dispose();
  fx.close();
});

describe('hostile files through the server', () => {
  it('64 compressed XMP packets of 16 MiB: 422 limit_exceeded from verify and protect; RSS rises by less than 512 MB', async () => {
    const bomb = pngWith(png, Array<Buffer>(64).fill(compressedXmpChunk(16 * MiB - 64)), 'beforeIdat');
    const pid = server.proc!.pid!;
    const base = rss(pid);
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 20);
    try {
      for (const endpoint of ['verify', 'protect'] as const) {
        const a = await api(server, endpoint, key, imageForm(bomb, 'bomb.png', 'image/png'));
        expect(a.status).toBe(422);
        expect(a.json.code).toBe('limit_exceeded');
      }
    } finally {
      clearInterval(sampler);
    }
    expect(peak - base).toBeLessThan(512 * MiB);
  });

  it('a 16 MiB compressed packet: protect answers 422 output_too_large, not a 16 MB image', async () => {
    const amp = pngWith(png, [compressedXmpChunk(16 * MiB - 64)], 'beforeIdat');
    const a = await api(server, 'protect', key, imageForm(amp, 'amp.png', 'image/png'));
    expect(a.status).toBe(422);
    expect(a.json.code).toBe('output_too_large');
    const v = await api(server, 'verify', key, imageForm(amp, 'amp.png', 'image/png'));
    expect(v.status).toBe(200);
    await server.settled();
  });
});
