// The manuals in docs/ describe the system as it is (docs/testing.md): docs/architecture.md names only files
// and folders that exist, and no manual carries a journal's marks (dated lines, commit hashes, pointers at a
// ../shared folder users do not have). History goes to CHANGELOG.md and bench/RESULTS.md.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const DOCS = join(ROOT, 'docs');
const read = (name: string): string => readFileSync(join(DOCS, name), 'utf8');

/** Every `src/...`, `bench/...`, `workers/...` or `native/...` path in `text` (not `dist/...`, not a URL's). */
function mentionedPaths(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?<![\w./-])(?:src|bench|workers|native)\/[\w./{},*-]*/g)) {
    const path = m[0].replace(/[.,:;)]+$/, '');
    // `src/{jpeg,png}.ts` names two files; `native/src/*` a folder.
    const brace = /\{([^}]*)\}/.exec(path);
    const paths = brace ? brace[1]!.split(',').map((part) => path.replace(brace[0], part)) : [path];
    for (const p of paths) found.add(p.includes('*') ? p.slice(0, p.indexOf('*')) : p);
  }
  return [...found];
}

describe('docs/architecture.md', () => {
  const text = read('architecture.md');

  it('names only paths that exist', () => {
    const paths = mentionedPaths(text);
    expect(paths.length).toBeGreaterThan(20);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });

  it('the path finder reads the forms the document uses', () => {
    expect(mentionedPaths('see `src/formats/{jpeg,png}.ts`, native/src/*, dist/bench/x.js and src/http/.')).toEqual([
      'src/formats/jpeg.ts',
      'src/formats/png.ts',
      'native/src/',
      'src/http/',
    ]);
  });
});

describe('the manuals in docs/', () => {
  const manuals = readdirSync(DOCS).filter((f) => f.endsWith('.md'));

  it.each(manuals)('%s has no dated line, commit hash, ../shared or journal heading, and fits its length', (name) => {
    const lines = read(name).split('\n');
    const marked = (re: RegExp): string[] => lines.filter((l) => re.test(l)).map((l) => `${name}: ${l.trim().slice(0, 120)}`);
    expect(marked(/\b20\d\d-\d\d-\d\d\b/)).toEqual([]);
    expect(marked(/`[0-9a-f]{7,40}`|\b(at|main at|commit) [0-9a-f]{7,12}\b/)).toEqual([]);
    expect(marked(/\.\.\/shared/)).toEqual([]);
    expect(marked(/^#+ .*\b(before|after|tried|history|journal|not kept|what did not pay)\b/i)).toEqual([]);
    expect(lines.length - 1).toBeLessThanOrEqual(name === 'fingerprint.md' ? 400 : 500);
  });
});

describe('docs/openapi.json', () => {
  it('points at nothing outside the repository', () => {
    expect(read('openapi.json')).not.toContain('../shared');
  });
});
