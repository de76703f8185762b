// The command line run in this process (src/cli.ts's run(), the same program the binary runs), with what
// it writes to stdout and stderr caught: a few milliseconds a call instead of a node start-up each.
// Tests of the binary itself (its exit status as a process, its stdout alone) spawn dist/src/cli.js.
import { run } from '../../src/cli.js';

export interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs `optmark ...args` in this process with `env` set over process.env for the call. */
export async function optmarkHere(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const write = { out: process.stdout.write, err: process.stderr.write };
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    const status = await run(args);
    return { status, stdout, stderr };
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
    process.exitCode = undefined;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
