import fs from 'node:fs';
import os from 'node:os';

/**
 * Which process wrote a row, precisely enough to tell later whether that process is still alive:
 * host, pid, and on Linux the boot id and the process's start time in clock ticks since boot
 * (`/proc/<pid>/stat` field 22), so a pid reused after a crash, or a machine rebooted since, is not
 * mistaken for the writer. Elsewhere only the pid is checked, which errs towards "alive": a row is
 * never reconciled while its writer might still be running.
 */
export interface ProcessIdentity {
  host: string;
  pid: number;
  bootId: string | null;
  startTicks: number | null;
  startedAt: number;
  command: string;
}

export function currentProcess(): ProcessIdentity {
  return {
    host: os.hostname(),
    pid: process.pid,
    bootId: bootId(),
    startTicks: startTicks(process.pid),
    startedAt: Math.round(Date.now() - process.uptime() * 1000),
    command: process.argv
      .slice(1, 3)
      .map((a) => a.split('/').pop())
      .join(' ')
      .slice(0, 200),
  };
}

/**
 * Whether the process that wrote rows as `owner` may still be running. `unknown` for another host:
 * only a process on the same machine can be checked, so such rows are left alone.
 */
export function ownerState(
  owner: Pick<ProcessIdentity, 'host' | 'pid' | 'bootId' | 'startTicks'>,
  here: ProcessIdentity = currentProcess(),
): 'alive' | 'gone' | 'unknown' {
  if (owner.host !== here.host) return 'unknown';
  if (owner.bootId && here.bootId && owner.bootId !== here.bootId) return 'gone';
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    // EPERM: the pid exists but belongs to someone else, so it may be the writer.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return 'gone';
  }
  // A killed owner its parent has not yet reaped still answers kill(0), but writes nothing more.
  if (processState(owner.pid) === 'Z') return 'gone';
  if (owner.startTicks !== null) {
    const ticks = startTicks(owner.pid);
    if (ticks !== null && ticks !== owner.startTicks) return 'gone';
  }
  return 'alive';
}

function bootId(): string | null {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** Field 22 of /proc/<pid>/stat; the command name (field 2) may hold spaces and parentheses. */
function startTicks(pid: number): number | null {
  const ticks = Number(statFields(pid)?.[19]);
  return Number.isFinite(ticks) ? ticks : null;
}

/** Field 3 of /proc/<pid>/stat (R, S, D, Z, …); null where there is no /proc. */
export function processState(pid: number): string | null {
  return statFields(pid)?.[0] ?? null;
}

/** The fields of /proc/<pid>/stat after the command name (field 3 onwards). */
function statFields(pid: number): string[] | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}
