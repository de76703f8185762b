/**
 * The files of a batch, as a stream: the arguments (files, and folders walked recursively) or a list
 * (--files-from FILE|-, one path a line or NUL-separated). Nothing is collected: a folder is read a
 * few entries at a time and a list a chunk at a time, so 100,000 files cost no more memory than ten.
 * Consequently files come in directory order, not sorted; reports name every file.
 */
import { closeSync, createReadStream, type Dir, fstatSync, openSync, opendirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { errnoText } from './files.js';

/** A regular file found, before it is read. */
export interface Found {
  kind: 'file';
  /** The path as the operator would write it (argument joined with the path below it). */
  input: string;
  /** The path to open. */
  source: string;
  /** Its real path, when it could be built without a system call or was asked for (in place, links). */
  real: string;
  /** Where it goes below --out. */
  rel: string;
}

/** Something found that is not a file to do (with the reason), reported as it is found. */
export interface Passed {
  kind: 'passed';
  input: string;
  status: 'skipped' | 'failed';
  code: string;
  message: string;
}

export type Entry = Found | Passed;

export interface SourceOptions {
  /** A folder never walked into (the real path of --out, when it lies inside an input). */
  skipDir?: string | undefined;
}

/** The files under the arguments, in argument order, each folder walked depth first. */
export async function* fromArguments(args: readonly string[], options: SourceOptions): AsyncGenerator<Entry> {
  // Arguments are few: the same file named twice (directly, or also inside a folder given) is done once.
  const roots: Array<{ root: string; arg: string }> = [];
  const seen = new Map<string, string>();
  for (const arg of args) {
    let st: Stats;
    try {
      st = statSync(arg);
    } catch (err) {
      yield passed(arg, 'failed', `read_${codeOf(err)}`, errnoText(err));
      continue;
    }
    if (st.isDirectory()) {
      const root = realpathSync.native(arg);
      roots.push({ root, arg });
      yield* walk(root, arg, '', options, seen);
    } else if (st.isFile()) {
      const real = realpathSync.native(arg);
      const inFolder = roots.find((r) => within(real, r.root) && !(options.skipDir && within(real, options.skipDir)));
      const first = seen.get(real) ?? (inFolder && join(inFolder.arg, relative(inFolder.root, real)));
      if (first !== undefined) {
        yield passed(arg, 'skipped', 'same_file', `same file as ${first}`);
        continue;
      }
      seen.set(real, arg);
      yield { kind: 'file', input: arg, source: real, real, rel: basename(arg) };
    } else {
      yield passed(arg, 'skipped', 'not_a_file', 'not a regular file');
    }
  }
}

/**
 * The files a list names (--files-from): relative paths from the current folder, kept below --out as
 * they are written; absolute paths and paths leading out of the current folder are kept whole below
 * --out (as rsync --files-from does). A folder listed is walked like a folder argument.
 */
export async function* fromList(stream: NodeJS.ReadableStream, separator: '\n' | '\0', options: SourceOptions): AsyncGenerator<Entry> {
  const cwd = process.cwd();
  for await (const line of lines(stream, separator)) {
    const path = separator === '\n' && line.endsWith('\r') ? line.slice(0, -1) : line;
    if (path === '') continue;
    const abs = resolve(cwd, path);
    const rel = listRel(cwd, abs);
    let st: Stats;
    try {
      st = statSync(abs);
    } catch (err) {
      yield passed(path, 'failed', `read_${codeOf(err)}`, errnoText(err));
      continue;
    }
    if (st.isDirectory()) {
      yield* walk(realpathSync.native(abs), path, rel, options, undefined);
    } else if (st.isFile()) {
      yield { kind: 'file', input: path, source: abs, real: '', rel };
    } else {
      yield passed(path, 'skipped', 'not_a_file', 'not a regular file');
    }
  }
}

/**
 * Which input writes `rel` below --out as its own name (before any renaming), for the arguments: a file
 * argument of that base name, or a file at `rel` below a folder argument (its walk reaches it: no link
 * to a folder on the way, not inside --out). The arguments are few, so this is known before the walk.
 */
export function argumentClaims(args: readonly string[], options: SourceOptions): (rel: string) => string | undefined {
  const files = new Map<string, string>();
  const roots: string[] = [];
  for (const arg of args) {
    try {
      const st = statSync(arg);
      if (st.isDirectory()) roots.push(realpathSync.native(arg));
      else if (st.isFile() && !files.has(basename(arg))) files.set(basename(arg), arg);
    } catch {
      // reported by the walk
    }
  }
  return (rel) => {
    const named = files.get(rel);
    if (named !== undefined) return named;
    for (const root of roots) {
      const path = join(root, rel);
      if (options.skipDir !== undefined && within(path, options.skipDir)) continue;
      if (isFile(path) && safeReal(dirname(path)) === dirname(path)) return path;
    }
    return undefined;
  };
}

/**
 * The same for a list (--files-from), which is read as the run goes and never held: any file at that
 * name beside the input counts, since the list may name it later.
 */
export function listClaims(rel: string, source: string): string | undefined {
  const sibling = join(dirname(source), basename(rel));
  return isFile(sibling) ? sibling : undefined;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Counts the regular files under the arguments (for the progress bar's total), streaming as the walk does. */
export async function countFiles(entries: AsyncIterable<Entry>): Promise<number> {
  let n = 0;
  for await (const e of entries) if (e.kind === 'file') n++;
  return n;
}

function listRel(cwd: string, abs: string): string {
  const rel = relative(cwd, abs);
  if (rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel)) return rel;
  return abs.replace(/^[/\\]+/, '').replace(/^[A-Za-z]:[/\\]*/, '');
}

/** Splits a stream into records, holding at most one partial record between chunks. */
async function* lines(stream: NodeJS.ReadableStream, separator: string): AsyncGenerator<string> {
  let rest = '';
  for await (const chunk of stream) {
    const text = rest + (typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8'));
    const parts = text.split(separator);
    rest = parts.pop()!;
    for (const p of parts) yield p;
  }
  if (rest !== '') yield rest;
}

/**
 * Opens the list: a file, or standard input for '-'. The file is opened here, synchronously, so that a
 * list that cannot be read stops the command with one message before any file: opened by the stream, the
 * error came while the lanes started, on a stream nobody listened to yet (verify crashed on it).
 */
export function openList(path: string): NodeJS.ReadableStream {
  if (path === '-') return process.stdin;
  const fd = openSync(path, 'r');
  if (fstatSync(fd).isDirectory()) {
    closeSync(fd);
    throw Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${path}'`), { code: 'EISDIR', syscall: 'open', path });
  }
  return createReadStream(path, { fd });
}

/**
 * Depth first below `root` (a real path): regular files, and links to regular files; links to
 * folders are not followed (they can form cycles). `display` is how the operator named the root.
 */
async function* walk(root: string, display: string, relBase: string, options: SourceOptions, given: Map<string, string> | undefined): AsyncGenerator<Entry> {
  // One open directory per level of depth: memory follows the tree's depth, not its size.
  const stack: string[] = [''];
  while (stack.length > 0) {
    const relDir = stack.pop()!;
    const dirPath = relDir === '' ? root : join(root, relDir);
    let dir: Dir;
    try {
      // Read synchronously, 64 entries a system call: a promise per entry cost more than the entry itself.
      dir = opendirSync(dirPath, { bufferSize: 64 });
    } catch (err) {
      yield passed(join(display, relDir), 'failed', `read_${codeOf(err)}`, errnoText(err));
      continue;
    }
    const subdirs: string[] = [];
    // Joined once per folder; its entries are then appended (under), as path.join would join them.
    const displayDir = join(display, relDir);
    const outDir = join(relBase, relDir);
    try {
      for (let e = dir.readSync(); e !== null; e = dir.readSync()) {
        const rel = under(relDir, e.name);
        const path = under(dirPath, e.name);
        const input = under(displayDir, e.name);
        if (e.isDirectory()) {
          if (options.skipDir !== undefined && path === options.skipDir) continue; // --out inside an input
          subdirs.push(rel);
        } else if (e.isFile()) {
          const named = given?.get(path);
          if (named !== undefined) yield passed(input, 'skipped', 'same_file', `same file as ${named}`);
          else yield { kind: 'file', input, source: path, real: path, rel: under(outDir, e.name) };
        } else if (e.isSymbolicLink()) {
          let st: Stats | undefined;
          try {
            st = statSync(path);
          } catch {
            st = undefined;
          }
          if (st?.isFile()) yield { kind: 'file', input, source: path, real: safeReal(path), rel: under(outDir, e.name) };
          else yield passed(input, 'skipped', st ? 'link_to_folder' : 'broken_link', st ? 'symbolic link to a folder (not followed)' : 'broken symbolic link');
        } else {
          yield passed(input, 'skipped', 'not_a_file', 'not a regular file');
        }
      }
    } catch (err) {
      yield passed(join(display, relDir), 'failed', `read_${codeOf(err)}`, errnoText(err));
    } finally {
      dir.closeSync();
    }
    // Subfolders in reverse so they pop in the order the directory listed them.
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i]!);
  }
}

/**
 * path.join(dir, name) for a normalized `dir` (as join and realpath make them) and a folder entry's name
 * (one component, never `.` or `..`), without normalizing again: it runs for every file of a walk.
 */
export function under(dir: string, name: string): string {
  if (dir === '' || dir === '.') return name;
  return dir.endsWith(sep) ? dir + name : dir + sep + name;
}

function within(path: string, dir: string): boolean {
  return path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

function safeReal(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}

function codeOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' ? code.toLowerCase() : 'failed';
}

function passed(input: string, status: 'skipped' | 'failed', code: string, message: string): Passed {
  return { kind: 'passed', input, status, code, message };
}
