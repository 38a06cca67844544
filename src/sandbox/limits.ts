import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import { shellQuote } from '../core/process/shell.js';
import { closeFdsScript } from './fds.js';
import type { SandboxLimits } from './types.js';

/**
 * Per-sample caps. With cgroups (v1 `pids`, `memory`, `cpuacct` controllers, or a v2 group with
 * `pids` and `memory` delegated) every process of the sample counts against one group: processes
 * and threads, memory, CPU time. RLIMIT_FSIZE (and RLIMIT_CPU where no cgroup counts CPU) apply to
 * every process too, root included. Without cgroups there is no process or memory cap for root:
 * RLIMIT_NPROC does not bind uid 0, and RLIMIT_AS breaks runtimes that reserve address space.
 */
export interface CgroupSupport {
  version: 1 | 2;
  /** v1: one folder per controller that new groups go under; v2: the one folder. */
  parents: { pids?: string; memory?: string; cpu?: string };
}

/** One sample's group: the folders to enter and to read, and how to end it. */
export interface SampleGroup {
  /** Every `cgroup.procs` a sandbox's first process must write its pid into. */
  procsFiles: string[];
  /** The limit the group hit, read from its counters; null when none. */
  hit(): string | null;
  /** Kills everything left in the group and removes it. */
  remove(): Promise<void>;
  /** SIGKILL to every process in the group (a limit was hit; the sample ends now). */
  killAll(): void;
}

let support: CgroupSupport | null | undefined;

/** Where this process may make child groups (cached; null when it may not). */
export function cgroupSupport(): CgroupSupport | null {
  if (support !== undefined) return support;
  support = detect();
  return support;
}

function detect(): CgroupSupport | null {
  let self: string;
  try {
    self = fs.readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  const lines = self
    .trim()
    .split('\n')
    .map((l) => l.split(':'));
  const v1 = (controller: string): string | undefined => {
    const line = lines.find((l) => l[1]?.split(',').includes(controller));
    if (!line) return undefined;
    const mount = ['/sys/fs/cgroup', controller].join('/');
    const dir = path.join(mount, line[2] ?? '/');
    return probe(dir) ? dir : undefined;
  };
  const pids = v1('pids');
  const memory = v1('memory');
  const cpu = v1('cpuacct');
  if (pids || memory) return { version: 1, parents: { ...(pids ? { pids } : {}), ...(memory ? { memory } : {}), ...(cpu ? { cpu } : {}) } };
  const unified = lines.find((l) => l[0] === '0' && l[1] === '');
  if (unified) {
    const dir = path.join('/sys/fs/cgroup', unified[2] ?? '/');
    try {
      const enabled = fs.readFileSync(path.join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
      if (enabled.includes('pids') && enabled.includes('memory') && probe(dir))
        return { version: 2, parents: { pids: dir, memory: dir, ...(enabled.includes('cpu') ? { cpu: dir } : {}) } };
    } catch {
      // no v2 delegation here
    }
  }
  return null;
}

/** Whether a child group can be made (and removed) under `dir`. */
function probe(dir: string): boolean {
  const test = path.join(dir, `polar-probe-${process.pid}`);
  try {
    fs.mkdirSync(test);
    fs.rmdirSync(test);
    return true;
  } catch {
    return false;
  }
}

/** Creates one sample's group with its caps; null without cgroup support. */
export function createGroup(limits: SandboxLimits, cg: CgroupSupport | null = cgroupSupport()): SampleGroup | null {
  if (!cg) return null;
  const name = `polar-${newId('sbx')}`;
  const dirs = new Map<string, string>();
  const make = (controller: keyof CgroupSupport['parents']) => {
    const parent = cg.parents[controller];
    if (!parent) return;
    const dir = path.join(parent, name);
    if (![...dirs.values()].includes(dir)) fs.mkdirSync(dir);
    dirs.set(controller, dir);
  };
  try {
    make('pids');
    make('memory');
    if (limits.maxCpuSeconds > 0) make('cpu');
    const pids = dirs.get('pids');
    const memory = dirs.get('memory');
    if (pids && limits.maxProcs > 0) fs.writeFileSync(path.join(pids, 'pids.max'), String(limits.maxProcs));
    if (memory && limits.maxMemoryBytes > 0) {
      fs.writeFileSync(path.join(memory, cg.version === 1 ? 'memory.limit_in_bytes' : 'memory.max'), String(limits.maxMemoryBytes));
      // v2: no swap either, so the cap is the cap (v1 here has no swap accounting to set).
      if (cg.version === 2) writeIfThere(path.join(memory, 'memory.swap.max'), '0');
    }
  } catch (err) {
    for (const dir of new Set(dirs.values())) rmdirQuiet(dir);
    throw new PolarError('POLAR_INTERNAL', `could not set up the sample's cgroup: ${(err as Error).message}`, undefined, { cause: err });
  }
  const unique = [...new Set(dirs.values())];
  return {
    procsFiles: unique.map((d) => path.join(d, 'cgroup.procs')),
    hit() {
      const pids = dirs.get('pids');
      if (pids && limits.maxProcs > 0 && eventCount(path.join(pids, 'pids.events'), 'max') > 0) return `process limit ${limits.maxProcs} reached`;
      const memory = dirs.get('memory');
      if (memory && limits.maxMemoryBytes > 0) {
        const oom =
          cg.version === 1 ? eventCount(path.join(memory, 'memory.oom_control'), 'oom_kill') : eventCount(path.join(memory, 'memory.events'), 'oom_kill');
        if (oom > 0) return `memory limit ${formatBytes(limits.maxMemoryBytes)} reached (a process was OOM-killed)`;
      }
      const cpu = dirs.get('cpu');
      if (cpu && limits.maxCpuSeconds > 0 && cpuSeconds(cpu, cg.version) >= limits.maxCpuSeconds) return `CPU time limit ${limits.maxCpuSeconds} s reached`;
      return null;
    },
    killAll() {
      for (const dir of unique) killProcs(dir);
    },
    async remove() {
      // Waits from 1 ms up to 20 ms between tries, about a second in all as before: the last
      // processes are usually dying already (bwrap reports the command's exit before its pid
      // namespace's init has reaped the rest, a proxy-only sample's forwarder among them), and a
      // first wait of 20 ms was most of such a sample's teardown.
      for (let i = 0, waited = 0; waited <= 1000; i++) {
        for (const dir of unique) killProcs(dir);
        if (unique.every((dir) => rmdirQuiet(dir))) return;
        const ms = Math.min(20, 2 ** i);
        await new Promise((r) => setTimeout(r, ms));
        waited += ms;
      }
    },
  };
}

/**
 * `ulimit -f` for a cap in bytes (soft and hard both). POSIX counts 512-byte blocks; bash outside
 * its POSIX mode counts 1024-byte ones, so the enter script run by bash passes `block` 1024.
 */
export function fileSizeUlimit(bytes: number, block: 512 | 1024 = 512): string {
  return `ulimit -f ${Math.max(1, Math.floor(bytes / block))}`;
}

/**
 * The shell line that closes every inherited descriptor above 2 (fds.ts; `bash` says whether it
 * runs in bash, which can close those above 9), enters the group and sets the rlimits, then
 * becomes `"$@"` (bwrap).
 */
export function enterScript(procsFiles: readonly string[], limits: SandboxLimits, cpuByRlimit: boolean, bash: boolean, ignoreTerminalSignals = false): string {
  // Ignored from here, bwrap ignores them too (an ignored signal stays ignored across exec).
  const parts = [...(ignoreTerminalSignals ? [`trap '' INT QUIT`] : []), ...procsFiles.map((f) => `echo $$ > ${shellQuote(f)}`)];
  if (limits.maxFileSizeBytes > 0) parts.push(fileSizeUlimit(limits.maxFileSizeBytes, bash ? 1024 : 512));
  if (cpuByRlimit && limits.maxCpuSeconds > 0) parts.push(`ulimit -t ${limits.maxCpuSeconds}`);
  parts.push('exec "$@"');
  return `${closeFdsScript(bash)}; ${parts.join(' && ')}`;
}

/** The reason for an exit status that says a per-process limit killed the command (128 + SIGXFSZ/SIGXCPU). */
export function rlimitReason(exitCode: number | null, signal: string | null, limits: SandboxLimits): string | null {
  if (signal === 'SIGXFSZ' || exitCode === 128 + 25) return `file size limit ${formatBytes(limits.maxFileSizeBytes)} exceeded`;
  if (signal === 'SIGXCPU' || exitCode === 128 + 24) return `CPU time limit ${limits.maxCpuSeconds} s reached`;
  return null;
}

export function formatBytes(n: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (n >= size) return `${Number((n / size).toFixed(2))} ${unit}`;
  }
  return `${n} B`;
}

/** `4g`, `512m`, `100k`, `1073741824`: bytes (binary units). */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$/i.exec(text);
  if (!m) throw new PolarError('POLAR_USAGE', `not a size: ${JSON.stringify(text)} (e.g. 4g, 512m, 0 for no cap)`);
  const power = { '': 0, k: 1, m: 2, g: 3, t: 4 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  return Math.round(Number(m[1]) * 1024 ** power);
}

function eventCount(file: string, key: string): number {
  try {
    const line = fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${key} `));
    return line ? Number(line.split(' ')[1]) : 0;
  } catch {
    return 0;
  }
}

function cpuSeconds(dir: string, version: 1 | 2): number {
  try {
    if (version === 1) return Number(fs.readFileSync(path.join(dir, 'cpuacct.usage'), 'utf8')) / 1e9;
    return eventCount(path.join(dir, 'cpu.stat'), 'usage_usec') / 1e6;
  } catch {
    return 0;
  }
}

function killProcs(dir: string): void {
  let pids: string[];
  try {
    pids = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

function rmdirQuiet(dir: string): boolean {
  try {
    fs.rmdirSync(dir);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

function writeIfThere(file: string, value: string): void {
  try {
    fs.writeFileSync(file, value);
  } catch {
    // an older kernel without the file
  }
}
