import path from 'node:path';
import type { HostView } from './view.js';
import type { NetworkMode } from './types.js';

/** Where the capture proxy's Unix socket appears inside a `proxy-only` sandbox. */
export const PROXY_SOCKET_INSIDE = '/run/polar/proxy.sock';

/** One sandboxed command's own paths and network; the host view is shared. */
export interface SandboxSpec {
  /** The working directory: writable, at its own absolute path. */
  cwd: string;
  /** Other writable paths (the session's private home among them). */
  writable: readonly string[];
  /** Paths mounted read-only (an evaluator's private files, `--sandbox-ro`). */
  readOnly: readonly string[];
  /** Host folders that become the sandbox's /tmp and /var/tmp. */
  tmp: string;
  varTmp: string;
  network: NetworkMode;
  /** With `proxy-only`: the proxy's Unix socket on the host. */
  proxySocket?: string;
  /** Mount the working directory here instead of at its own path (a Harbor task's WORKDIR, /app). */
  cwdInside?: string;
  /** Host paths mounted at other paths inside (a Harbor task's /logs, /tests, /solution). */
  binds?: readonly Bind[];
  /**
   * Paths inside a writable folder the command must not see (polar's database and `.polar/` state
   * when `polar run` works in the folder that holds them): a folder becomes an empty tmpfs, a file
   * an empty read-only one. Mounted after the folder that holds them, so a writable path deeper
   * down (the session's own home under `.polar/runs/`) still shows through.
   */
  hidden?: readonly { path: string; dir: boolean }[];
  /**
   * Show polar's install (the view's `install`) under this path, as `<polarInside>/node_modules`,
   * instead of at its own: a rollout's fixed path (fixed-paths.ts), so two checkouts of polar give
   * a harness one view of its own files (Gemini CLI and Pi name them in their first prompt).
   */
  polarInside?: string;
  /** A new terminal session (headless runs): off for an interactive run, whose job control needs the terminal. */
  newSession: boolean;
  uid: number;
  gid: number;
}

/** A host path at another path inside the sandbox. */
export interface Bind {
  source: string;
  dest: string;
  readOnly: boolean;
}

/**
 * bubblewrap's arguments, up to and including `--`. bwrap starts from an empty tmpfs root, so every
 * path the command sees is listed here: a read-only root could not take the mount points
 * (bwrap cannot create them on it). Mounts go parent first, so a writable workspace under a
 * read-only folder or under the private /tmp lands on top. Pure: tests check it without bwrap.
 */
export function bwrapArgs(view: HostView, spec: SandboxSpec): string[] {
  const args = [
    // Its own user namespace with every capability dropped: as root without it, the command could
    // mknod a disk and mount it, or signal anything on the host.
    // No user namespaces inside either: each one is fresh kernel attack surface, and nothing a
    // harness runs needs them.
    '--unshare-user',
    '--uid',
    String(spec.uid),
    '--gid',
    String(spec.gid),
    '--cap-drop',
    'ALL',
    '--disable-userns',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(spec.network === 'host' ? [] : ['--unshare-net']),
    '--hostname',
    'polar-sandbox',
    '--die-with-parent',
    ...(spec.newSession ? ['--new-session'] : []),
  ];
  for (const [target, link] of view.symlinks) args.push('--symlink', target, link);
  const mounts: { at: string; args: string[] }[] = [];
  const install = installMount(view, spec);
  for (const d of view.dirs) if (d !== install?.source) mounts.push({ at: d, args: ['--ro-bind', d, d] });
  if (install) mounts.push({ at: install.dest, args: ['--ro-bind', install.source, install.dest] });
  mounts.push({ at: '/etc', args: ['--ro-bind', view.etc, '/etc'] });
  for (const p of spec.readOnly) mounts.push({ at: path.resolve(p), args: ['--ro-bind', path.resolve(p), path.resolve(p)] });
  mounts.push({ at: '/tmp', args: ['--bind', spec.tmp, '/tmp'] }, { at: '/var/tmp', args: ['--bind', spec.varTmp, '/var/tmp'] });
  const inside = spec.cwdInside ? path.posix.resolve(spec.cwdInside) : null;
  const own = [...new Set([...(inside ? [] : [spec.cwd]), ...spec.writable].map((w) => path.resolve(w)))];
  if (inside)
    refuseOverlap(inside, [
      ...spec.readOnly.map((p) => path.resolve(p)),
      ...own,
      ...(spec.binds ?? []).map((b) => path.posix.resolve(b.dest)),
      ...(install ? [install.dest] : []),
    ]);
  for (const p of own) mounts.push({ at: p, args: ['--bind', p, p] });
  if (inside) mounts.push({ at: inside, args: ['--bind', path.resolve(spec.cwd), inside] });
  for (const b of spec.binds ?? [])
    mounts.push({ at: path.posix.resolve(b.dest), args: [b.readOnly ? '--ro-bind' : '--bind', path.resolve(b.source), path.posix.resolve(b.dest)] });
  for (const f of view.masked) mounts.push({ at: f, args: ['--ro-bind', '/dev/null', f] });
  const cwd = path.resolve(spec.cwd);
  for (const h of spec.hidden ?? []) {
    // Named on the host; with the working directory mounted elsewhere, hidden where it appears.
    const host = path.resolve(h.path);
    const at = inside && (host === cwd || host.startsWith(`${cwd}/`)) ? path.posix.join(inside, path.relative(cwd, host)) : host;
    mounts.push({ at, args: h.dir ? ['--tmpfs', at] : ['--ro-bind', '/dev/null', at] });
  }
  if (spec.network === 'proxy-only') {
    if (!spec.proxySocket) throw new Error('a proxy-only sandbox needs the proxy socket');
    mounts.push({ at: PROXY_SOCKET_INSIDE, args: ['--ro-bind', spec.proxySocket, PROXY_SOCKET_INSIDE] });
  }
  // Stable: equal depths keep their order (masks after the folders they sit in).
  mounts.sort((a, b) => depth(a.at) - depth(b.at));
  for (const m of mounts) args.push(...m.args);
  // The empty root itself is read-only once every mount is in place: a write anywhere but the
  // writable binds fails (EROFS) instead of landing in a scratch tmpfs.
  args.push('--proc', '/proc', '--dev', '/dev', '--remount-ro', '/', '--chdir', inside ?? path.resolve(spec.cwd), '--');
  return args;
}

/** Where polar's install is shown instead of its own path (`polarInside`), or null: at its own. */
export function installMount(view: HostView, spec: Pick<SandboxSpec, 'polarInside'>): Bind | null {
  if (!spec.polarInside || !view.install) return null;
  return { source: path.resolve(view.install), dest: path.posix.join(path.posix.resolve(spec.polarInside), 'node_modules'), readOnly: true };
}

/**
 * A working directory mounted elsewhere (the fixed /workspace, a Harbor task's WORKDIR) must not share
 * its place with another mount: one at the same path or under it would put host files (a task's
 * hidden checkers) among the agent's, or the agent's files where the evaluator looks for its own; one
 * above it would hide it. rollout/sandboxing.ts picks paths clear of every mount; this is the wall.
 */
function refuseOverlap(inside: string, mounted: readonly string[]): void {
  for (const m of mounted) {
    if (m === inside || m.startsWith(`${inside}/`) || inside.startsWith(`${m}/`) || m === '/')
      throw new Error(`the sandbox's working directory ${inside} would overlap the mount ${m}: choose the in-sandbox path clear of it`);
  }
}

function depth(p: string): number {
  return p.split('/').filter(Boolean).length;
}
