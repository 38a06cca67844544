import fs from 'node:fs';
import { PolarError } from '../core/errors.js';

/**
 * Descriptors polar inherited. Whoever launched polar (a CI step, a wrapper script, a shell with
 * `exec 20</some/dir`) may have left descriptors open without close-on-exec, and neither Node nor
 * libuv closes them in a child: through /proc/self/fd/N a sandboxed command could then read and
 * write a host folder no mount shows it, or write into the launcher's pipe. bubblewrap passes every
 * open descriptor on to the command on purpose (its `--info-fd`/`--sync-fd` design), so they must
 * be closed before it execs, by the shell that enters the sample's cgroup (enterScript). Node's
 * own descriptors are all close-on-exec and never reach a child.
 *
 * bash closes each open one by number (`exec {f}>&-`, bash ≥ 4.1); a POSIX sh (dash) only takes
 * single-digit descriptors in a redirection, so where there is no bash, sh closes 3–9 and openJail
 * refuses to start while polar holds an inheritable descriptor above 9 (see inheritableFds).
 */
export interface EnterShell {
  /** The shell the enter script runs in. */
  file: string;
  /** Its flags before `-c`. */
  flags: readonly string[];
  /** Whether it is bash, which can close descriptors above 9. */
  bash: boolean;
}

let shell: EnterShell | undefined;

/**
 * bash at a system path (not PATH, which is the user's), else /bin/sh; looked up once. bash runs
 * with -p: it runs outside the sandbox, and without -p it would source $BASH_ENV and take
 * `BASH_FUNC_echo%%`-style functions from the command's environment before bwrap starts (its real
 * and effective ids are equal, so -p changes nothing else).
 */
export function enterShell(): EnterShell {
  if (shell) return shell;
  for (const file of ['/bin/bash', '/usr/bin/bash']) {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      shell = { file, flags: ['-p'], bash: true };
      return shell;
    } catch {
      // not here
    }
  }
  shell = { file: '/bin/sh', flags: [], bash: false };
  return shell;
}

/**
 * The shell words that close every descriptor above 2. bash: one glob of its own /proc/$$/fd (the
 * directory descriptor the glob opened is already closed when the loop runs; closing a closed
 * descriptor is no error); about a millisecond over dash per command. sh: 3 to 9, by name.
 */
export function closeFdsScript(bash: boolean): string {
  if (bash) return 'for f in /proc/$$/fd/*; do f=${f##*/}; case $f in [012] | *[!0-9]*) ;; *) exec {f}>&- ;; esac; done';
  return 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-';
}

/**
 * The descriptors at or above `min` that a child of process `pid` would inherit: open without
 * close-on-exec, read from /proc/PID/fdinfo (its `flags` carry O_CLOEXEC when it is set).
 */
export function inheritableFds(min: number, pid: number | 'self' = 'self'): number[] {
  const O_CLOEXEC = 0o2000000;
  let names: string[];
  try {
    names = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < min) continue;
    try {
      const flags = /^flags:\s*([0-7]+)/m.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'));
      if (flags && (Number.parseInt(flags[1]!, 8) & O_CLOEXEC) === 0) found.push(fd);
    } catch {
      // closed meanwhile (the readdir's own descriptor among them)
    }
  }
  return found.sort((a, b) => a - b);
}

/** Throws when `shell` cannot close a descriptor this process would pass on (only without bash). */
export function checkInheritedFds(shell: EnterShell, inheritable: () => number[] = () => inheritableFds(10)): void {
  if (shell.bash) return;
  const high = inheritable();
  if (high.length === 0) return;
  const list = high.join(', ');
  throw new PolarError(
    'POLAR_USAGE',
    `polar was started with descriptor${high.length > 1 ? 's' : ''} ${list} open, which a sandboxed command would inherit (and reach host files through /proc/self/fd), and ${shell.file} cannot close descriptors above 9: install bash, or close ${high.length > 1 ? 'them' : 'it'} before starting polar (${high.map((fd) => `exec ${fd}>&-`).join('; ')})`,
  );
}
