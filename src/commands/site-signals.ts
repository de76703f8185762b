/**
 * `optmark site-signals --policy <url> [--out <dir>] [--force]`: the site's own AI-use signals from one
 * policy (src/signals/site.ts, docs/signals.md). With --out the files are written under <dir> as a web
 * server serves them; without, they go to standard output, each after a `==> path <==` line.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { dirErrorReason, fileErrorReason, makeDirs } from '../datadir.js';
import { checkPolicyUrl, PolicyUrlError, siteSignals } from '../signals/site.js';
import { exitWith, UsageError } from './args.js';

export interface SiteSignalsOptions {
  policy: string;
  out: string | undefined;
  force: boolean;
}

/** Writes (or prints) the site's signals; returns the exit status. */
export function runSiteSignals(o: SiteSignalsOptions): number {
  let policy: string;
  try {
    policy = checkPolicyUrl(o.policy);
  } catch (err) {
    if (err instanceof PolicyUrlError) throw new UsageError(`site-signals: ${err.message}`);
    throw err;
  }
  const files = siteSignals(policy);
  if (o.out === undefined) {
    process.stdout.write(
      Object.entries(files)
        .map(([path, text]) => `==> ${path} <==\n${text}`)
        .join('\n'),
    );
    return 0;
  }
  const written: string[] = [];
  for (const [rel, text] of Object.entries(files)) {
    const path = join(o.out, rel);
    try {
      makeDirs(dirname(path));
    } catch (err) {
      process.stderr.write(`optmark site-signals: cannot create the folder ${dirname(path)}: ${dirErrorReason(err)}\n`);
      return 1;
    }
    try {
      // 'wx' by default: a robots.txt already in a document root is the operator's to merge, not ours to replace.
      writeFileSync(path, text, { flag: o.force ? 'w' : 'wx', mode: 0o644 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why =
        code === 'EEXIST'
          ? 'it exists (merge it by hand, or give --force to replace it)'
          : (fileErrorReason(code) ?? `the system refused it (${code ?? 'unknown'})`);
      process.stderr.write(`optmark site-signals: cannot write ${path}: ${why}\n`);
      return 1;
    }
    written.push(rel);
  }
  process.stdout.write(`wrote ${written.join(', ')} under ${o.out} (policy ${policy})\n`);
  return 0;
}

/** Registers `optmark site-signals` on the command line. */
export function register(program: Command): void {
  program
    .command('site-signals')
    .summary("write the site's AI-use signals: robots.txt, ai.txt, tdmrep.json and header snippets for nginx, Caddy and Apache")
    .description(
      'From one policy URL, write what crawlers read before and beside the images: robots.txt groups disallowing the known AI ' +
        'crawlers with an AIPREF Content-Usage rule (train-ai=n), ai.txt, /.well-known/tdmrep.json (W3C TDMRep), and the headers ' +
        'X-Robots-Tag: noai, noimageai, tdm-reservation: 1, tdm-policy and Content-Usage as nginx, Caddy and Apache snippets (docs/signals.md).',
    )
    .requiredOption('--policy <url>', 'the absolute URL of the page that states your terms for text and data mining (tdm-policy)')
    .option('--out <dir>', 'write the files under <dir>, as the web server serves them (default: print them)')
    .option('--force', 'replace files that exist under --out (by default they are left alone and the command fails)')
    .action((o: { policy: string; out?: string; force?: boolean }) => {
      exitWith(runSiteSignals({ policy: o.policy, out: o.out, force: o.force === true }));
    });
}
