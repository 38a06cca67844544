import fs from 'node:fs';
import path from 'node:path';
import type { HarnessCommand } from './types.js';

/**
 * Isolation for commands a model wrote: a harness runs them with its approvals bypassed, and an
 * evaluator runs the code the agent left. With bubblewrap (`bwrap`, Debian package `bubblewrap`),
 * the whole file system is mounted read-only except the paths listed as writable (the workspace,
 * the session's private home), /tmp is a private tmpfs, /proc and /dev are the sandbox's own, and
 * the command gets its own pid namespace, so it and everything it started end with it
 * (`--die-with-parent`). The network is shared: the harness still reaches the proxy on loopback.
 * `none` runs commands as they are.
 */
export type SandboxKind = 'bwrap' | 'none';

export interface Sandbox {
  kind: SandboxKind;
  /** Paths the command may write (created if missing). */
  writable: string[];
}

/** `bwrap` when it is installed and works here (a user-namespace-less kernel can refuse it), else null. */
export function findBwrap(pathEnv: string | undefined = process.env.PATH): string | null {
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'bwrap');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** The command, run inside the sandbox (unchanged for `none`). */
export function sandboxed(cmd: HarnessCommand, sandbox: Sandbox, cwd: string, bwrap = 'bwrap'): HarnessCommand {
  if (sandbox.kind === 'none') return cmd;
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/var/tmp'];
  // Binds after the tmpfs mounts, so a writable path under /tmp shows through them.
  for (const p of unique([cwd, ...sandbox.writable])) {
    fs.mkdirSync(p, { recursive: true });
    args.push('--bind', p, p);
  }
  args.push('--unshare-pid', '--die-with-parent', '--chdir', cwd, '--', cmd.file, ...cmd.args);
  return { file: bwrap, args, env: cmd.env };
}

function unique(paths: string[]): string[] {
  return [...new Set(paths.map((p) => path.resolve(p)))];
}
