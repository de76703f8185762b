/**
 * The data directory holds key hashes, usage counters, the signing key and the fingerprint secret:
 * nothing in it is for other local users. The directory is 0700 and the store's files 0600, made so
 * when created and tightened at start when an older version (or an operator) left them looser. Key and
 * secret files are written by src/secrets/files.ts.
 */
import { accessSync, chmodSync, closeSync, constants, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const DATA_DIR_MODE = 0o700;
export const DATA_FILE_MODE = 0o600;

/** The store's files in the data directory (SQLite creates -wal and -shm with the database file's mode). */
export const STORE_FILES = ['optmark.db', 'optmark.db-wal', 'optmark.db-shm'] as const;

/** Where `serve` writes the start-up key when its standard output is not a terminal. */
export const BOOTSTRAP_KEY_FILE = 'bootstrap-key.txt';

export interface ModeChange {
  path: string;
  /** Octal, as `ls -l` shows it: '755'. */
  from: string;
  to: string;
}

export interface ModeProblem {
  path: string;
  error: string;
}

const octal = (mode: number): string => (mode & 0o777).toString(8);

/** Why a file system call refused a path, in words (undefined for codes without a plain explanation). */
export function fileErrorReason(code: string | undefined): string | undefined {
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied for this user';
    case 'ENOTDIR':
      return 'a part of the path is a file, not a directory';
    case 'ENOENT':
      return 'no such file or directory';
    case 'EISDIR':
      return 'it is a directory, not a file';
    case 'EEXIST':
      return 'it is a file, not a directory';
    case 'EROFS':
      return 'the file system is read-only';
    case 'ENOSPC':
      return 'no space left on the device';
    case 'EDQUOT':
      return "the user's disk quota is used up";
    default:
      return undefined;
  }
}

/** Why `err`, thrown by makeDirs or another file system call on `path`, refused it, in words. */
export function dirErrorReason(err: unknown): string {
  if (err instanceof DirRefusedError) return err.reason;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return fileErrorReason(code) ?? `the system refused it (${code ?? 'unknown'})`;
}

/** A folder that its parent's file system will not create (mkdir answers ENOENT with the parent there). */
export class DirRefusedError extends Error {
  readonly code = 'ENOENT';
  readonly reason: string;
  constructor(
    readonly path: string,
    parent: string,
  ) {
    const reason = `${parent} does not take new folders (mkdir answers ENOENT)`;
    super(`cannot create ${path}: ${reason}`);
    this.reason = reason;
    this.name = 'DirRefusedError';
  }
}

/**
 * `mkdir -p`: creates `dir` and its missing parents (with `mode`), and succeeds when it is a directory
 * already. Node's own recursive mkdir (sync and async, Node 20) takes every ENOENT for a missing parent
 * and tries again forever where a file system refuses new entries with ENOENT (under /proc): this one
 * creates each parent once and throws DirRefusedError when the folder still cannot be made.
 */
export function makeDirs(dir: string, mode?: number): void {
  try {
    mkdirSync(dir, { mode });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeDirs(parent, mode);
  }
  try {
    mkdirSync(dir, { mode });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return; // made by another process meanwhile
    throw code === 'ENOENT' ? new DirRefusedError(dir, dirname(dir)) : err;
  }
}

/** The data directory cannot be created or written; the message names it, why, and what to do. */
export class DataDirError extends Error {
  constructor(
    readonly dir: string,
    readonly code: string | undefined,
    reason = fileErrorReason(code) ?? `the system refused it (${code ?? 'unknown'})`,
  ) {
    super(`cannot use the data directory ${dir}: ${reason}. Set OPTMARK_DATA_DIR to a directory this user can create and write (default ./data)`);
    this.name = 'DataDirError';
  }
}

/**
 * Creates `dir` (and its parents) with mode 0700 when it is missing, and checks that this user may write
 * in it; the mode of existing parents is left alone. Throws a DataDirError saying why not.
 */
export function makePrivateDir(dir: string): void {
  try {
    makeDirs(dir, DATA_DIR_MODE);
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw new DataDirError(dir, (err as NodeJS.ErrnoException).code, dirErrorReason(err));
  }
}

/** Creates an empty file with mode 0600 unless it exists (a later open by SQLite keeps that mode). */
export function makePrivateFile(path: string): void {
  try {
    closeSync(openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, DATA_FILE_MODE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

function tighten(path: string, mode: number, changes: ModeChange[], problems: ModeProblem[]): void {
  let current: number;
  try {
    current = statSync(path).mode & 0o777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    problems.push({ path, error: (err as Error).message });
    return;
  }
  if ((current & 0o077) === 0) return;
  try {
    chmodSync(path, current & ~0o077 & mode);
    changes.push({ path, from: octal(current), to: octal(current & ~0o077 & mode) });
  } catch (err) {
    problems.push({ path, error: (err as Error).message });
  }
}

/**
 * Creates the data directory (0700) if missing, and takes every permission for group and others off
 * the directory and the store's files that exist. Returns what it changed and what it could not change
 * (a directory owned by another user), for the caller to log.
 */
export function secureDataDir(dir: string): { changes: ModeChange[]; problems: ModeProblem[] } {
  makePrivateDir(dir);
  const changes: ModeChange[] = [];
  const problems: ModeProblem[] = [];
  tighten(dir, DATA_DIR_MODE, changes, problems);
  for (const name of [...STORE_FILES, BOOTSTRAP_KEY_FILE]) tighten(join(dir, name), DATA_FILE_MODE, changes, problems);
  return { changes, problems };
}
