import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDir, isFile } from '../core/fs-kind.js';

/**
 * The host's part of a sandbox's file system, the same for every command of a process: read once
 * and cached (a rollout starts many sandboxes; none of them should pay for these lookups again).
 * Everything is mounted read-only at its own path.
 */
export interface HostView {
  /** Directories bound read-only: /usr, the Node runtime, polar's node_modules, toolchains on PATH. */
  dirs: string[];
  /** Top-level names that are symlinks on the host (`/bin -> usr/bin`): [target, path]. */
  symlinks: [string, string][];
  /**
   * A folder mounted as /etc: a copy, made once per process, of the entries of the host's /etc a
   * toolchain needs. One mount instead of ~30 (each bind costs about a millisecond per sandbox).
   */
  etc: string;
  /** Files inside bound folders hidden behind an empty file (credentials beside a toolchain). */
  masked: string[];
  /**
   * Where a bound version manager finds itself (VOLTA_HOME, PYENV_ROOT, NVM_DIR): each defaults to a
   * folder in $HOME, and the sandbox's home is a private one, so volta's shims would look for
   * ~/.volta there and find nothing. Given to every command; a variable the command sets wins.
   */
  env?: Record<string, string>;
  /**
   * polar's install: the outermost node_modules folder that holds polar and the harness CLIs beside
   * it (its own, or the project's it is installed into), one of `dirs`. A fixed-path sandbox shows it
   * at a fixed path instead (fixed-paths.ts), so no harness names the host's checkout path.
   */
  install?: string;
}

/** Top-level system directories: bound when real, recreated as the same symlink when the host has one. */
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * What of /etc a compiler, a package manager or git reads. Never shadow, gshadow, sudoers, ssh,
 * machine-id, TLS private keys, /etc/environment or profile.d (where machines keep exported tokens),
 * or anything a host service keeps its keys in: this is an allow-list.
 */
export const ETC_ALLOWED = [
  'passwd',
  'group',
  'hosts',
  'hostname',
  'resolv.conf',
  'nsswitch.conf',
  'host.conf',
  'gai.conf',
  'services',
  'protocols',
  'networks',
  // Certificates only: /etc/ssl/private and /etc/pki/tls/private hold the machine's keys.
  'ssl/certs',
  'ssl/openssl.cnf',
  'ca-certificates',
  'ca-certificates.conf',
  'pki/tls/certs',
  'pki/ca-trust',
  'pki/tls/openssl.cnf',
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'locale.alias',
  'locale.conf',
  'default/locale',
  'gitconfig',
  'pip.conf',
  'npmrc',
  'python3',
  'perl',
  'os-release',
  'debian_version',
  'lsb-release',
  'mime.types',
  'magic',
  'magic.mime',
  'inputrc',
  'bash.bashrc',
  'shells',
  'mtab',
  'java-17-openjdk',
  'java-21-openjdk',
  'fonts',
];

/** Files in a toolchain folder that hold a registry credential rather than the toolchain (masked). */
export const TOOLCHAIN_SECRETS = ['credentials', 'credentials.toml', '.credentials', 'auth.json', '.npmrc', '.pypirc', 'config.json'];

const cache = new Map<string, HostView>();

/** The view for this process's PATH and home (cached per pair). */
export function hostView(env: { PATH?: string; HOME?: string } = process.env): HostView {
  const key = `${env.PATH ?? ''}\0${env.HOME ?? ''}`;
  let view = cache.get(key);
  if (!view) {
    view = readHostView(env.PATH ?? '', env.HOME || os.homedir());
    cache.set(key, view);
  }
  return view;
}

function readHostView(pathEnv: string, home: string): HostView {
  const symlinks: [string, string][] = [];
  const dirs: string[] = [];
  for (const top of SYSTEM) {
    const link = readLink(top);
    if (link !== null) symlinks.push([link, top]);
    else if (isDir(top)) dirs.push(top);
  }
  // The Node runtime polar runs on (the bridge runs on it too), by its install prefix.
  dirs.push(path.dirname(path.dirname(realOr(process.execPath))));
  // The harness CLIs installed beside polar, and the node_modules polar itself sits in, if any.
  const install = polarInstall();
  dirs.push(install);
  const homeDirs: string[] = [];
  // In PATH's order: the first version manager on it is the one whose shims run (managerEnv).
  const onPath = pathEnv.split(path.delimiter).flatMap((entry) => pathEntryDirs(entry, home));
  for (const dir of onPath) (dir.startsWith(`${path.resolve(home)}/`) ? homeDirs : dirs).push(dir);
  dirs.push(...homeDirs);
  const bound = minimalCover(dirs.filter((d) => isDir(d)));
  // A toolchain under the home folder may keep a registry login beside it (~/.cargo/credentials.toml).
  const masked = homeDirs.flatMap((d) => TOOLCHAIN_SECRETS.map((name) => path.join(d, name))).filter((p) => fs.existsSync(p));
  return { dirs: bound, symlinks, etc: etcCopy(), masked, install, env: managerEnv(onPath) };
}

/**
 * Everything a PATH entry needs inside: its toolchain's folders (toolchainDirs), those of the folder
 * it is a link to, and those of where the links in it lead (`~/.local/bin/black` ->
 * `~/.local/share/pipx/venvs/black/bin/black`, `/usr/local/bin/node` -> `/opt/node-v22/bin/node`,
 * a venv's `bin/python3` -> `/opt/pyenv/versions/3.12.4/bin/python3.12`, a pyenv version that is a
 * link to a Python installed elsewhere): a link whose target is not bound runs outside and exits 127
 * inside. A link's target counts as if its folder were on PATH (the same rules). The system
 * folders' links are not followed (thousands of them, into /usr and /etc/alternatives), but for
 * /usr/local's, where an admin links a toolchain in /opt.
 */
export function pathEntryDirs(entry: string, home: string): string[] {
  if (!path.isAbsolute(entry)) return [];
  const p = path.resolve(entry);
  const real = realOr(p);
  const dirs = [...toolchainDirs(p, home), ...(real !== p ? toolchainDirs(real, home) : [])];
  const scanned = [...(!isSystem(real) || /^\/usr\/local\/s?bin$/.test(real) ? [real] : [])];
  for (const root of dirs) if (managerKind(root) === 'pyenv') scanned.push(path.join(root, 'versions'));
  for (const dir of scanned) {
    for (const target of linkTargets(dir)) {
      if (dirs.some((d) => target === d || target.startsWith(`${d}/`))) continue;
      const at = isDir(target) ? target : path.dirname(target);
      dirs.push(...toolchainDirs(at, home));
    }
  }
  return [...new Set(dirs)];
}

/** Where the links directly in `dir` lead (resolved), those that lead somewhere. */
function linkTargets(dir: string): string[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const e of entries) {
    if (!e.isSymbolicLink()) continue;
    try {
      out.push(fs.realpathSync(path.join(dir, e.name)));
    } catch {
      // a dangling link: nothing to bind
    }
  }
  return out;
}

/**
 * The variables a bound version manager finds its root by: the host's where it names a root on
 * PATH, else the first root of each kind on PATH (the one whose shims run).
 */
export function managerEnv(onPath: readonly string[], hostEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const vars = { pyenv: 'PYENV_ROOT', nvm: 'NVM_DIR', volta: 'VOLTA_HOME' } as const;
  const roots = new Map<string, string[]>();
  for (const dir of onPath) {
    const kind = managerKind(dir);
    if (kind && kind !== 'conda') roots.set(vars[kind], [...(roots.get(vars[kind]) ?? []), dir]);
  }
  const env: Record<string, string> = {};
  for (const [name, found] of roots) {
    const host = hostEnv[name];
    env[name] = host && found.includes(path.resolve(host)) ? path.resolve(host) : found[0]!;
  }
  return env;
}

/**
 * A version manager's root recognised by its layout, wherever it is installed (~/.pyenv, /opt/pyenv,
 * /usr/local/nvm): pyenv's shims run `libexec/pyenv exec`, which runs `versions/X/bin/python3`; a
 * conda env's files link into its base's pkgs/; nvm's and volta's shims and versions sit under one
 * root. pyenv and nvm are git checkouts, which toolchainDirs otherwise never binds whole.
 */
function managerKind(dir: string): 'pyenv' | 'conda' | 'nvm' | 'volta' | null {
  if (isFile(path.join(dir, 'libexec', 'pyenv')) && isDir(path.join(dir, 'shims'))) return 'pyenv';
  if (isDir(path.join(dir, 'conda-meta'))) return 'conda';
  if (isFile(path.join(dir, 'nvm.sh'))) return 'nvm';
  if (isDir(path.join(dir, 'tools')) && ['volta', 'volta-shim'].some((b) => isFile(path.join(dir, 'bin', b)))) return 'volta';
  return null;
}

/**
 * The outermost version manager root holding `p` (a conda env under its base's envs/: the base; a
 * conda under ~/.pyenv/versions: the pyenv), below the home folder and the root, else null.
 */
function managerRoot(p: string, home: string): string | null {
  let found: string | null = null;
  for (let dir = p; dir !== '/' && dir !== home && !isSystem(dir); dir = path.dirname(dir)) if (managerKind(dir)) found = dir;
  return found;
}

function isSystem(p: string): boolean {
  return SYSTEM.some((s) => p === s || p.startsWith(`${s}/`));
}

/**
 * The node_modules folder polar's harness CLIs are installed in: the one polar itself sits in when
 * it is a dependency of another project (`…/node_modules/polar-rollout`: the CLIs are hoisted
 * beside it), else polar's own.
 */
export function polarInstall(): string {
  const polarRoot = path.resolve(fileURLToPath(new URL('../../', import.meta.url)));
  const parts = polarRoot.split(path.sep);
  const enclosing = parts.lastIndexOf('node_modules');
  return enclosing > 0 ? parts.slice(0, enclosing + 1).join(path.sep) : path.join(polarRoot, 'node_modules');
}

/** Folders in the home that hold logins and keys, never bound whatever links or PATH lead into them. */
const HOME_SECRETS = ['.ssh', '.gnupg', '.aws', '.azure', '.kube', '.docker', '.password-store', '.netrc', '.git-credentials'];

/**
 * The folders to bind for a PATH entry outside the system directories: a version manager's root,
 * recognised by its layout wherever it is (managerKind: `/opt/pyenv/shims` -> `/opt/pyenv`,
 * `/opt/conda/envs/x/bin` -> `/opt/conda`); else under the home folder, its toolchain's top folder
 * (`~/.cargo/bin` -> `~/.cargo`; `~/.local` only as its bin and lib; in ~/.config or ~/.cache the
 * tool's own folder), never the home folder itself; elsewhere a `bin` folder's prefix
 * (`/opt/node/bin` -> `/opt/node`), a `node_modules/.bin`'s node_modules, or the entry alone. A
 * checkout's own folder is never bound whole: an entry whose prefix holds a `.git` binds only
 * itself (pyenv and nvm are checkouts too, but their layout says what they are).
 */
export function toolchainDirs(entry: string, home: string): string[] {
  if (!path.isAbsolute(entry)) return [];
  const p = path.resolve(entry);
  if (isSystem(p)) return [];
  if (['/tmp', '/var/tmp', '/proc', '/sys', '/dev', '/run', '/etc'].some((x) => p === x || p.startsWith(`${x}/`))) return [];
  const h = path.resolve(home);
  if (p === h || p === '/') return [];
  if (h !== '/' && HOME_SECRETS.some((s) => p === path.join(h, s) || p.startsWith(`${path.join(h, s)}/`))) return [];
  const root = managerRoot(p, h);
  if (root) return [root];
  // A checkout's `node_modules/.bin` (npm puts it first on PATH for `npm test`): its node_modules only,
  // wherever the checkout is — never the checkout itself.
  if (path.basename(p) === '.bin' && path.basename(path.dirname(p)) === 'node_modules') return [path.dirname(p)];
  // Under the home folder, toolchains keep a dot-folder of their own (~/.pyenv, ~/.cargo, ~/.nvm);
  // any other top folder (~/projects, a checkout) holds the user's own files and is never bound whole.
  if (h !== '/' && p.startsWith(`${h}/`) && p.slice(h.length + 1).startsWith('.')) {
    const parts = p.slice(h.length + 1).split('/');
    // Folders many tools share (gcloud keeps its credentials in ~/.config): the tool's own folder in them.
    if (['.config', '.cache'].includes(parts[0]!) || (parts[0] === '.local' && ['share', 'state'].includes(parts[1]!))) {
      const depth = parts[0] === '.local' ? 3 : 2;
      return parts.length > depth ? [path.join(h, ...parts.slice(0, depth))] : [p];
    }
    const top = path.join(h, parts[0]!);
    return parts[0] === '.local' ? [path.join(top, 'bin'), path.join(top, 'lib')] : [top];
  }
  const prefix = path.dirname(p);
  if ((path.basename(p) === 'bin' || path.basename(p) === 'sbin') && prefix !== '/' && !fs.existsSync(path.join(prefix, '.git'))) return [prefix];
  return [p];
}

let etcFolder: string | null = null;

/**
 * The allowed /etc entries copied into a private folder (symlinks kept as links: /etc/ssl/certs and
 * /etc/alternatives point into /usr, which the sandbox has). Removed when the process exits. A host
 * change to /etc after this (a new resolv.conf) reaches sandboxes started by a new process.
 */
function etcCopy(): string {
  if (etcFolder) return etcFolder;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-etc-'));
  for (const name of ETC_ALLOWED) {
    const from = path.join('/etc', name);
    const to = path.join(dir, name);
    try {
      const st = fs.statSync(from);
      fs.mkdirSync(path.dirname(to), { recursive: true });
      const link = readLink(from);
      // A link into /usr or /proc (localtime, mtab) works as a link inside; one elsewhere (a
      // resolv.conf under /run) would dangle there, so its content is copied.
      const target = link === null ? null : path.resolve(path.dirname(from), link);
      if (target && ['/usr/', '/proc/'].some((p) => target.startsWith(p))) fs.symlinkSync(link!, to);
      else if (st.isDirectory()) fs.cpSync(from, to, { recursive: true, verbatimSymlinks: true });
      else fs.copyFileSync(from, to);
    } catch {
      // absent here, or unreadable: the sandbox goes without it
    }
  }
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  etcFolder = dir;
  return dir;
}

/** Drops folders inside another folder of the list (a bind of the parent already shows them). */
export function minimalCover(dirs: string[]): string[] {
  const sorted = [...new Set(dirs.map((d) => path.resolve(d)))].sort((a, b) => a.length - b.length);
  const kept: string[] = [];
  for (const d of sorted) if (!kept.some((k) => d === k || d.startsWith(k === '/' ? '/' : `${k}/`))) kept.push(d);
  return kept;
}

function readLink(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}

function realOr(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return p;
  }
}
