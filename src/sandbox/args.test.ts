import { describe, expect, it } from 'vitest';
import { bwrapArgs, PROXY_SOCKET_INSIDE, type SandboxSpec } from './args.js';
import { minimalCover, toolchainDirs } from './view.js';
import { enterScript, parseSize, rlimitReason } from './limits.js';
import { DEFAULT_LIMITS } from './types.js';
import type { HostView } from './view.js';

const VIEW: HostView = { dirs: ['/usr', '/root/.pyenv'], symlinks: [['usr/bin', '/bin']], etc: '/tmp/polar-etc-x', masked: ['/root/.pyenv/credentials'] };
const SPEC: SandboxSpec = {
  cwd: '/tmp/out/workspaces/t-0',
  writable: ['/db/.polar/runs/s/home'],
  readOnly: [],
  tmp: '/tmp/sbx/tmp',
  varTmp: '/tmp/sbx/var-tmp',
  network: 'proxy-only',
  proxySocket: '/tmp/px/proxy.sock',
  newSession: true,
  uid: 0,
  gid: 0,
};

/** Pairs of (flag, destination) for every mount, in order. */
function mounts(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) if (['--bind', '--ro-bind'].includes(args[i]!)) out.push(`${args[i]} ${args[i + 2]}`);
  return out;
}

describe('bwrapArgs', () => {
  it('drops capabilities in its own user, pid, ipc, uts and network namespaces', () => {
    const args = bwrapArgs(VIEW, SPEC);
    for (const flag of [
      '--unshare-user',
      '--disable-userns',
      '--cap-drop',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-net',
      '--die-with-parent',
      '--new-session',
    ])
      expect(args).toContain(flag);
    expect(args.slice(args.indexOf('--cap-drop'), args.indexOf('--cap-drop') + 2)).toEqual(['--cap-drop', 'ALL']);
    expect(args.at(-1)).toBe('--');
  });

  it('never binds the root, and mounts parents before what sits in them', () => {
    const args = bwrapArgs(VIEW, SPEC);
    const m = mounts(args);
    expect(m.some((x) => x.endsWith(' /'))).toBe(false);
    expect(m.indexOf('--bind /tmp')).toBeLessThan(m.indexOf('--bind /tmp/out/workspaces/t-0'));
    expect(m.indexOf('--ro-bind /root/.pyenv')).toBeLessThan(m.indexOf('--ro-bind /root/.pyenv/credentials'));
    expect(args.join(' ')).toContain('--ro-bind /dev/null /root/.pyenv/credentials');
    expect(m).toContain(`--ro-bind ${PROXY_SOCKET_INSIDE}`);
    expect(args.join(' ')).toContain('--symlink usr/bin /bin');
    expect(args.join(' ')).toContain('--ro-bind /tmp/polar-etc-x /etc');
    expect(args.slice(args.indexOf('--chdir'), args.indexOf('--chdir') + 2)).toEqual(['--chdir', '/tmp/out/workspaces/t-0']);
  });

  it("hides polar's records in a writable folder: a folder as an empty tmpfs, a file as an empty read-only one, both after the folder and before the run's own home inside", () => {
    const spec: SandboxSpec = {
      ...SPEC,
      cwd: '/proj',
      writable: ['/proj/.polar/runs/s/home'],
      hidden: [
        { path: '/proj/.polar', dir: true },
        { path: '/proj/polar.db', dir: false },
      ],
    };
    const args = bwrapArgs(VIEW, spec);
    const at = (flag: string, dest: string) => args.findIndex((a, i) => a === flag && (flag === '--tmpfs' ? args[i + 1] === dest : args[i + 2] === dest));
    expect(args.slice(at('--ro-bind', '/proj/polar.db'), at('--ro-bind', '/proj/polar.db') + 3)).toEqual(['--ro-bind', '/dev/null', '/proj/polar.db']);
    expect(at('--tmpfs', '/proj/.polar')).toBeGreaterThan(at('--bind', '/proj'));
    expect(at('--tmpfs', '/proj/.polar')).toBeLessThan(at('--bind', '/proj/.polar/runs/s/home'));
    expect(at('--ro-bind', '/proj/polar.db')).toBeGreaterThan(at('--bind', '/proj'));
  });

  it('host network keeps the namespace; an interactive run keeps its terminal session', () => {
    const args = bwrapArgs(VIEW, { ...SPEC, network: 'host', newSession: false });
    expect(args).not.toContain('--unshare-net');
    expect(args).not.toContain('--new-session');
    expect(mounts(args)).not.toContain(`--ro-bind ${PROXY_SOCKET_INSIDE}`);
  });

  it('proxy-only without a socket is a programming error', () => {
    expect(() => bwrapArgs(VIEW, { ...SPEC, proxySocket: undefined } as SandboxSpec)).toThrow(/proxy socket/);
  });
});

describe('host view rules', () => {
  it('binds a toolchain under the home folder by its top folder, never the home itself', () => {
    expect(toolchainDirs('/root/.pyenv/shims', '/root')).toEqual(['/root/.pyenv']);
    expect(toolchainDirs('/root/.local/bin', '/root')).toEqual(['/root/.local/bin', '/root/.local/lib']);
    expect(toolchainDirs('/root', '/root')).toEqual([]);
    expect(toolchainDirs('/root/.config/composer/vendor/bin', '/root')).toEqual(['/root/.config/composer']);
    expect(toolchainDirs('/root/.local/share/pnpm', '/root')).toEqual(['/root/.local/share/pnpm']);
    expect(toolchainDirs('/root/.local/share/mise/shims', '/root')).toEqual(['/root/.local/share/mise']);
    expect(toolchainDirs('/usr/local/bin', '/root')).toEqual([]);
    expect(toolchainDirs('/opt/conda/bin', '/root')).toEqual(['/opt/conda']);
    expect(toolchainDirs('/srv/app/node_modules/.bin', '/root')).toEqual(['/srv/app/node_modules']);
    expect(toolchainDirs('/tmp/x/bin', '/root')).toEqual([]);
    expect(toolchainDirs('relative/bin', '/root')).toEqual([]);
    // A checkout in the home folder (npm test puts its node_modules/.bin on PATH): its node_modules,
    // never the checkout or another of the home's own folders.
    expect(toolchainDirs('/home/u/clone/node_modules/.bin', '/home/u')).toEqual(['/home/u/clone/node_modules']);
    expect(toolchainDirs('/home/u/clone/scripts', '/home/u')).toEqual(['/home/u/clone/scripts']);
    expect(toolchainDirs('/home/u/projects/tool/bin', '/home/u')).toEqual(['/home/u/projects/tool']);
  });

  it('drops folders another one already covers', () => {
    expect(minimalCover(['/usr/lib', '/usr', '/opt/a', '/opt/ab'])).toEqual(['/usr', '/opt/a', '/opt/ab']);
  });
});

describe('limits', () => {
  it('parses sizes in binary units', () => {
    expect(parseSize('4g')).toBe(4 * 1024 ** 3);
    expect(parseSize('512M')).toBe(512 * 1024 ** 2);
    expect(parseSize('1GiB')).toBe(1024 ** 3);
    expect(parseSize('0')).toBe(0);
    expect(() => parseSize('lots')).toThrow(/not a size/);
  });

  it('closes inherited descriptors, enters every group, then sets the file size cap in 512-byte blocks, then runs the command', () => {
    expect(enterScript(['/cg/pids/x/cgroup.procs'], { ...DEFAULT_LIMITS, maxFileSizeBytes: 1024 * 1024 }, false, false)).toBe(
      'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; echo $$ > \'/cg/pids/x/cgroup.procs\' && ulimit -f 2048 && exec "$@"',
    );
    expect(enterScript([], { ...DEFAULT_LIMITS, maxCpuSeconds: 5 }, true, true)).toContain('ulimit -t 5');
    // bash (not in POSIX mode) counts 1024-byte blocks: the same 1 MiB.
    expect(enterScript([], { ...DEFAULT_LIMITS, maxFileSizeBytes: 1024 * 1024 }, false, true)).toMatch(
      /^for f in \/proc\/\$\$\/fd\/\*; .*; done; ulimit -f 1024 && exec "\$@"$/,
    );
  });

  it('reads a per-process cap from the exit status', () => {
    expect(rlimitReason(153, null, DEFAULT_LIMITS)).toBe('file size limit 1 GiB exceeded');
    expect(rlimitReason(null, 'SIGXCPU', DEFAULT_LIMITS)).toBe('CPU time limit 3600 s reached');
    expect(rlimitReason(1, null, DEFAULT_LIMITS)).toBeNull();
  });
});
