/**
 * The temporary folders (`optmark-bench-server-*`: a server's data directory, and its log when the run
 * keeps none) and child processes of a load run. Each folder is removed when its server stops, when the
 * start fails, when the process exits for any reason, and on SIGINT/SIGTERM (after the children stop),
 * so a run leaves nothing in the temporary directory.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dirs = new Set<string>();
const children = new Set<ChildProcess>();
let installed = false;

/** Exit statuses of a process ended by a signal, as shells report them. */
const SIGNAL_STATUS: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

function removeAll(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

async function onSignal(signal: NodeJS.Signals): Promise<void> {
  uninstall();
  // Stop the servers first (their data directories are open), a few seconds at most, then remove.
  const live = [...children].filter((c) => c.exitCode === null && c.signalCode === null);
  await Promise.race([
    Promise.all(
      live.map(
        (c) =>
          new Promise<void>((resolve) => {
            c.once('exit', () => resolve());
            c.kill('SIGTERM');
          }),
      ),
    ),
    new Promise((r) => setTimeout(r, 5000).unref()),
  ]);
  removeAll();
  process.exit(SIGNAL_STATUS[signal] ?? 1);
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', removeAll);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

function uninstall(): void {
  if (!installed) return;
  installed = false;
  process.off('exit', removeAll);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

/** Makes a temporary folder `<tmpdir>/<prefix>XXXXXX` that is removed however the run ends. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  install();
  return dir;
}

/** Removes a folder made by scratchDir now. */
export function removeScratch(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
  if (dirs.size === 0 && children.size === 0) uninstall();
}

/** Stops `child` too if the run is interrupted. */
export function trackChild(child: ChildProcess): void {
  children.add(child);
  install();
  child.once('exit', () => {
    children.delete(child);
    if (dirs.size === 0 && children.size === 0) uninstall();
  });
}

/** Folders made by scratchDir and not yet removed (for tests). */
export function scratchDirs(): string[] {
  return [...dirs];
}
