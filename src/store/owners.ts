/**
 * Owners and leases, for both engines: who holds a reservation (a fresh owner id per opened store, with
 * what lets another instance on this host see its process die), how long its lease lasts, and how a
 * reconciling instance tells that an owner is gone. The engines keep the rows (table `owners`); the
 * rules are here.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** An instance's lease on the units it holds; renewed every LEASE_RENEW_MS. */
export const LEASE_MS = 15_000;
export const LEASE_RENEW_MS = 5000;
/** How often a server looks for dead instances' holds. */
export const RECONCILE_INTERVAL_MS = 1000;

/** Who holds units: a fresh id per opened store, with what lets another instance on this host see it die. */
export interface OwnerIdentity {
  id: string;
  /** Host name and kernel boot id: a pid means something only on the same host and boot. */
  host: string;
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): tells a reused pid apart. */
  started: string;
}

let hostCache: string | undefined;

export function thisHost(): string {
  if (hostCache === undefined) {
    let boot = '';
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      // No /proc: liveness is then known from leases only.
    }
    hostCache = `${hostname()}/${boot}`;
  }
  return hostCache;
}

/** The start time of a process, or undefined when it does not exist (or /proc cannot tell). */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19];
  } catch {
    return undefined;
  }
}

export function newOwner(): OwnerIdentity {
  return { id: randomUUID(), host: thisHost(), pid: process.pid, started: processStart(process.pid) ?? '' };
}

export interface OwnerRow {
  id: string;
  host: string;
  pid: number;
  started: string;
  expiresAt: number;
}

/**
 * Is the owner gone? Its lease ran out, or it ran on this host (same boot) and its process is dead
 * (no such pid, or the pid now belongs to a process started at another time). /proc missing means
 * "cannot tell": the lease decides.
 */
export function isDead(owner: OwnerRow, me: OwnerIdentity, now: number): boolean {
  if (owner.id === me.id) return false;
  if (owner.expiresAt < now) return true;
  if (owner.host !== me.host || !me.host.includes('/') || me.host.endsWith('/')) return false;
  if (owner.started === '') return false;
  const started = processStart(owner.pid);
  return started === undefined ? !pidExists(owner.pid) : started !== owner.started;
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** An `owners` row as both engines read it (`expires_at`: the lease's end, epoch ms). */
export interface OwnerDbRow {
  id: string;
  host: string;
  pid: number;
  started: string;
  expires_at: number;
}

export const SELECT_OWNERS = 'SELECT id, host, pid, started, expires_at FROM owners';

/** The ids of the owners in `rows` that `me` finds gone at `now` (see isDead). */
export function deadOwners(rows: readonly OwnerDbRow[], me: OwnerIdentity, now: number): string[] {
  return rows.filter((o) => isDead({ id: o.id, host: o.host, pid: o.pid, started: o.started, expiresAt: o.expires_at }, me, now)).map((o) => o.id);
}

/** An owner's registration as the INSERT into `owners` takes it: id, host, pid, start time, lease end. */
export function registration(o: OwnerIdentity, now: number): [string, string, number, string, number] {
  return [o.id, o.host, o.pid, o.started, now + LEASE_MS];
}
