import fs from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import type { CommandLine } from '../core/process/command-line.js';
import { bwrapArgs, installMount, PROXY_SOCKET_INSIDE, type Bind } from './args.js';
import { bridgeCommand, findForwarder, withTerminalSignals } from './bridge.js';
import { checkInheritedFds, enterShell } from './fds.js';
import { cgroupSupport, createGroup, enterScript, rlimitReason, formatBytes, type SampleGroup } from './limits.js';
import type { NetworkMode, SandboxSettings } from './types.js';
import { hostView } from './view.js';

/** One sandboxed command's paths and network (the rest comes from the process's settings). */
export interface JailSpec {
  /** The working directory, writable at its own path. */
  cwd: string;
  writable?: readonly string[];
  readOnly?: readonly string[];
  /** The command's home (writable); a private one is made when absent. */
  home?: string;
  /**
   * Mount the home at this path inside instead of its own (a rollout's fixed home, fixed-paths.ts),
   * and point HOME there: the harness then names no host path or session id.
   */
  homeInside?: string;
  network: NetworkMode;
  /** With `proxy-only`: the capture proxy's TCP port (the bridge listens on it inside) and Unix socket. */
  proxy?: { port: number; socket: string };
  /** Mount the working directory at this path inside instead of its own (a Harbor task's WORKDIR). */
  cwdInside?: string;
  /**
   * Show polar's install (its node_modules with the harness CLIs) under this path instead of its own
   * (a rollout's fixed one, fixed-paths.ts): a command started from it, and PATH entries in it, are
   * given as the sandbox shows them.
   */
  polarInside?: string;
  /** The time zone every process inside is given (`TZ`; a rollout's: UTC), over the host's. */
  tz?: string;
  /** Host paths at other paths inside (a Harbor task's /logs, /tests, /solution). */
  binds?: readonly Bind[];
  /** Paths under a writable folder hidden from the command (see SandboxSpec.hidden). */
  hidden?: readonly { path: string; dir: boolean }[];
  /** The terminal is handed through (`polar run` without --prompt). */
  interactive?: boolean;
  /**
   * Look through the working directory too for a file grown to the file-size cap when the command
   * ends (the harness run: its tools die of SIGXFSZ while it goes on). Its private folders are always
   * looked through; a short command's own exit status says it.
   */
  findCappedFiles?: boolean;
}

/**
 * One command's sandbox, for as long as the command runs: its private /tmp and home, its cgroup
 * (entered before bwrap starts, so nothing it forks escapes the count), no descriptor polar
 * inherited (closed before bwrap starts, fds.ts), a watcher that ends the command the moment a cap
 * is hit, and the cleanup that ends whatever it left behind.
 */
export interface Jail {
  /** The command's home as the command sees it (`homeInside`, else its host path); null with `--sandbox none`. */
  readonly home: string | null;
  /** The command as it must be spawned (the same with `--sandbox none`). */
  wrap(cmd: CommandLine): CommandLine;
  /**
   * After the command ended: the cap it hit ("process limit 1024 reached", …) or null. Everything
   * it started is killed and its group and private folders removed.
   */
  close(exit?: { exitCode: number | null; signal: string | null }): Promise<string | null>;
}

const WATCH_MS = 200;

export async function openJail(settings: SandboxSettings, spec: JailSpec): Promise<Jail> {
  if (settings.kind === 'none') {
    return { home: spec.home ?? null, wrap: (cmd) => cmd, close: async () => null };
  }
  checkWorkdir(spec.cwd);
  const shell = enterShell();
  checkInheritedFds(shell);
  if (spec.network === 'proxy-only' && !spec.proxy) throw new Error('a proxy-only sandbox needs the proxy port and socket');
  const forwarder = spec.network === 'proxy-only' ? await findForwarder(settings.forwarder) : null;
  // At a terminal, Ctrl-C and Ctrl-\ reach every process of the foreground group, bwrap's own among
  // them, and bwrap dies of them and takes the sandbox along, where the harness should decide what
  // they mean (a line-mode harness cancels its turn and goes on). An interactive sandbox's bwrap
  // starts with them ignored wherever the command gets them back: from the bridge (the Perl one
  // restores them before its exec, the Node one's spawn resets every signal) or a Perl exec.
  const interactive = spec.interactive === true;
  const resetter = interactive && !forwarder ? await findForwarder(settings.forwarder) : null;
  const started = Date.now();
  const own = await mkdtemp(path.join(os.tmpdir(), 'polar-sbx-'));
  const tmp = path.join(own, 'tmp');
  const varTmp = path.join(own, 'var-tmp');
  const home = spec.home ?? path.join(own, 'home');
  await Promise.all([tmp, varTmp, home, spec.cwd, ...(spec.writable ?? [])].map((d) => mkdir(d, { recursive: true, mode: 0o700 })));
  const limits = settings.limits;
  let group: SampleGroup | null = null;
  try {
    group = createGroup(limits);
  } catch (err) {
    await rm(own, { recursive: true, force: true });
    throw err;
  }
  let reason: string | null = null;
  const watcher = group
    ? setInterval(() => {
        const hit = group!.hit();
        if (hit && reason === null) {
          reason = hit;
          group!.killAll();
        }
      }, WATCH_MS)
    : undefined;
  watcher?.unref();
  const network = spec.network;
  const homeInside = spec.homeInside ? path.posix.resolve(spec.homeInside) : null;
  const binds = [...(homeInside ? [{ source: home, dest: homeInside, readOnly: false }] : []), ...(spec.binds ?? [])];
  const view = hostView();
  const args = bwrapArgs(view, {
    cwd: spec.cwd,
    writable: [...(homeInside ? [] : [home]), ...(spec.writable ?? [])],
    readOnly: [...settings.extraReadOnly, ...(spec.readOnly ?? [])],
    tmp,
    varTmp,
    network,
    ...(spec.proxy ? { proxySocket: spec.proxy.socket } : {}),
    ...(spec.cwdInside ? { cwdInside: spec.cwdInside } : {}),
    ...(binds.length > 0 ? { binds } : {}),
    ...(spec.hidden ? { hidden: spec.hidden } : {}),
    ...(spec.polarInside ? { polarInside: spec.polarInside } : {}),
    // An interactive run stays in the terminal's session: a new session has no controlling
    // terminal, so the harness would lose job control (Ctrl-Z, its own Ctrl-C handling).
    newSession: spec.interactive !== true,
    uid: process.getuid?.() ?? 0,
    gid: process.getgid?.() ?? 0,
  });
  const cpuCounted = group !== null && cgroupSupport()?.parents.cpu !== undefined;
  // Host folders shown at other paths inside: a command named by its host path, or a PATH entry in
  // one, is given as the sandbox shows it (a harness started from polar's moved install).
  const install = installMount(view, spec);
  const elsewhere = [...(install ? [install] : []), ...binds.filter((b) => b.readOnly)];
  let closed = false;
  return {
    home: homeInside ?? home,
    wrap(given) {
      const cmd = elsewhere.length > 0 ? placed(given, elsewhere) : given;
      const reset = resetter && withTerminalSignals(resetter, cmd);
      const inner = forwarder ? bridgeCommand(forwarder, spec.proxy!.port, PROXY_SOCKET_INSIDE, interactive, cmd) : (reset ?? cmd);
      const script = enterScript(group?.procsFiles ?? [], limits, !cpuCounted, shell.bash, interactive && (forwarder !== null || reset !== null));
      return {
        file: shell.file,
        args: [...shell.flags, '-c', script, 'sh', settings.bwrap, ...args, inner.file, ...inner.args],
        // A version manager's root (PYENV_ROOT, VOLTA_HOME) unless the command names its own: the private home has none.
        env: { ...view.env, ...inner.env, HOME: homeInside ?? home, TMPDIR: '/tmp', ...(spec.tz ? { TZ: spec.tz } : {}) },
      };
    },
    async close(exit) {
      if (closed) return reason;
      closed = true;
      if (watcher) clearInterval(watcher);
      reason ??= group?.hit() ?? (exit ? rlimitReason(exit.exitCode, exit.signal, limits) : null);
      const found = bigFile([...(spec.findCappedFiles ? [spec.cwd] : []), home, tmp, varTmp], limits.maxFileSizeBytes, started);
      // Named as the command saw it: the private /tmp's host folder means nothing to a reader.
      const inside =
        found &&
        (found.startsWith(`${tmp}/`) ? `/tmp${found.slice(tmp.length)}` : found.startsWith(`${varTmp}/`) ? `/var/tmp${found.slice(varTmp.length)}` : found);
      reason ??= inside ? `file size limit ${formatBytes(limits.maxFileSizeBytes)} exceeded (${inside})` : null;
      await group?.remove();
      await rm(own, { recursive: true, force: true }).catch(() => undefined);
      return reason;
    },
  };
}

/** `cmd` with its file and PATH entries under a moved folder named as the sandbox shows them. */
function placed(cmd: CommandLine, moved: readonly Bind[]): CommandLine {
  const inside = (p: string): string => {
    const m = moved.find((b) => p === b.source || p.startsWith(`${b.source}/`));
    return m ? path.posix.join(m.dest, path.relative(m.source, p)) : p;
  };
  const env = cmd.env.PATH === undefined ? cmd.env : { ...cmd.env, PATH: cmd.env.PATH.split(path.delimiter).map(inside).join(path.delimiter) };
  return { ...cmd, file: path.isAbsolute(cmd.file) ? inside(path.resolve(cmd.file)) : cmd.file, env };
}

/**
 * The working directory is mounted writable: never the whole machine, a system folder, or a folder
 * holding the user's home (its ~/.ssh and cloud credentials would be the agent's to read and edit).
 */
export function checkWorkdir(cwd: string, home = process.env.HOME || os.homedir()): void {
  const p = path.resolve(cwd);
  const h = path.resolve(home);
  const system = ['/', '/usr', '/etc', '/bin', '/sbin', '/lib', '/lib64', '/boot', '/proc', '/sys', '/dev', '/run', '/var'];
  if (system.includes(p))
    throw new PolarError('POLAR_USAGE', `the sandbox makes the working directory writable, and ${p} is a system folder: run in a project folder`);
  if (h !== '/' && (p === h || h.startsWith(`${p}/`))) {
    throw new PolarError(
      'POLAR_USAGE',
      `the sandbox makes the working directory writable, and ${p} holds your home folder (~/.ssh, credentials, shell history): run in a project folder, or pass --sandbox none to give the harness your access`,
    );
  }
}

/**
 * A file the command grew to the file-size cap (its path): RLIMIT_FSIZE kills the writer (a tool the
 * harness ran, say) and leaves the file at exactly the cap, and the harness itself may go on, so its
 * exit says nothing. Bounded walk; symlinks are not followed.
 */
function bigFile(roots: string[], cap: number, since: number): string | null {
  if (cap <= 0) return null;
  let budget = 200_000;
  const stack = [...roots];
  while (stack.length > 0 && budget > 0) {
    const dir = stack.pop()!;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      if (--budget <= 0) break;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile()) {
        try {
          const st = fs.statSync(p);
          if (st.size >= cap && st.mtimeMs >= since - 1000) return p;
        } catch {
          // removed meanwhile
        }
      }
    }
  }
  return null;
}
