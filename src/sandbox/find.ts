import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import type { SandboxKind } from './types.js';

/** `bwrap` when it is installed here, else null. */
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

const probed = new Map<string, string | null>();

/**
 * Why this bwrap cannot make the sandbox here (a kernel or policy without unprivileged user
 * namespaces, say), or null when it can. Tried once per process, with the namespaces polar uses.
 */
export function bwrapProblem(bwrap: string): string | null {
  if (!probed.has(bwrap)) {
    const r = spawnSync(bwrap, ['--unshare-user', '--unshare-pid', '--unshare-net', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--', 'true'], {
      timeout: 10_000,
      encoding: 'utf8',
    });
    probed.set(bwrap, r.status === 0 ? null : (r.stderr || r.error?.message || `exit ${r.status ?? r.signal}`).trim());
  }
  return probed.get(bwrap)!;
}

/** The bwrap binary for `kind`, or a usage error that says how to get it ('' with `none`). */
export function requireBwrap(kind: SandboxKind): string {
  if (kind === 'none') return '';
  const bwrap = findBwrap();
  if (!bwrap) throw new PolarError('POLAR_USAGE', '--sandbox bwrap needs bubblewrap (Debian: apt-get install bubblewrap); or pass --sandbox none');
  const problem = bwrapProblem(bwrap);
  if (problem)
    throw new PolarError(
      'POLAR_USAGE',
      `bubblewrap cannot make a sandbox on this machine (${problem}); allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap), or pass --sandbox none`,
    );
  return bwrap;
}
