/**
 * The one loader of uWebSockets.js. The registry build we depend on silently swaps in a slow pure-JS
 * emulation when its native binary does not load; we detect that (the binary shows up in the module
 * cache only when it loaded) and refuse to run on it unless the operator opted in.
 */
import { createRequire } from 'node:module';
import type * as UwsModule from 'uWebSockets.js';

export type Uws = typeof UwsModule;
export type Transport = 'uws-native' | 'uws-js-fallback';

export class UwsFallbackError extends Error {
  constructor() {
    super(
      'uWebSockets.js could not load its native binary for this platform and Node.js ' +
        `(${process.platform}-${process.arch}, ABI ${process.versions.modules}); it would fall back to a slow ` +
        'pure-JS emulation.\nPossible solutions:\n' +
        "- Run on Node.js 20 with glibc >= 2.36 (the registry build's binaries), or\n" +
        '- on Node.js 22/24, switch the dependency to the official build (see README, "Node.js versions"), or\n' +
        '- set OPTMARK_ALLOW_UWS_FALLBACK=1 to accept the slow fallback.',
    );
    this.name = 'UwsFallbackError';
  }
}

/** Loads uWebSockets.js and says which transport it is; throws UwsFallbackError on the fallback unless allowed. */
export function loadUws(allowFallback: boolean): { uws: Uws; transport: Transport } {
  const require = createRequire(import.meta.url);
  // The library prints its own fallback warning through console.warn; ours is clearer, so mute it.
  const warn = console.warn;
  console.warn = () => {};
  let uws: Uws;
  try {
    uws = require('uWebSockets.js') as Uws;
  } finally {
    console.warn = warn;
  }
  const native = Object.keys(require.cache).some((p) => /uws_[^/\\]+\.node$/.test(p));
  const transport: Transport = native ? 'uws-native' : 'uws-js-fallback';
  if (!native && !allowFallback) throw new UwsFallbackError();
  if (!native) completeFallback(require);
  return { uws, transport };
}

type Patchable = { prototype: Record<string, unknown> };

/**
 * The fallback (an emulation on node:http) throws "Not implemented" from the calls our answers are
 * written with, and its app has no close(): without these the first request killed the server. Bodies
 * go out through write() and end() (node:http buffers them, so onWritable is never needed) and close() closes the
 * emulated listener and its connections. Only ever applied to the fallback the operator opted into.
 */
function completeFallback(require: NodeJS.Require): void {
  const { HttpResponse } = require('uWebSockets.js/dist/http-response.js') as { HttpResponse: Patchable };
  const { default: TemplatedApp } = require('uWebSockets.js/dist/templated-app.js') as { default: Patchable };
  type Emulated = { end(body: Uint8Array): void; write(body: Uint8Array): void; written?: number };
  Object.assign(HttpResponse.prototype, {
    getWriteOffset(this: Emulated) {
      return this.written ?? 0;
    },
    // A part of the body (an answer whose last byte waits for its quota commit) is written; the rest ends it.
    tryEnd(this: Emulated, body: Uint8Array, total: number): [boolean, boolean] {
      const written = (this.written ?? 0) + body.length;
      this.written = written;
      if (written < total) {
        this.write(body);
        return [true, false];
      }
      this.end(body);
      return [true, true];
    },
  });
  TemplatedApp.prototype.close ??= function (this: { httpContext: { close(): void } }) {
    this.httpContext.close();
  };
}
