import { describe, expect, it } from 'vitest';
import { bwrapArgs, type SandboxSpec } from './args.js';
import { insidePaths } from './fixed-paths.js';
import type { HostView } from './view.js';

const VIEW: HostView = { dirs: ['/usr', '/opt/polar/node_modules'], symlinks: [['usr/bin', '/bin']], etc: '/tmp/polar-etc-x', masked: [] };

/** One sample's sandbox as a rollout opens it: its own host folders, the fixed paths inside. */
function sample(i: number): SandboxSpec {
  const home = `/db/.polar/runs/ses_${i}/home`;
  return {
    cwd: `/out/workspaces/t-${i}-a1`,
    cwdInside: '/workspace',
    writable: [],
    binds: [{ source: home, dest: '/home/agent', readOnly: false }],
    readOnly: [],
    tmp: `/tmp/sbx-${i}/tmp`,
    varTmp: `/tmp/sbx-${i}/var-tmp`,
    network: 'proxy-only',
    proxySocket: '/tmp/px/proxy.sock',
    hidden: [{ path: `/out/workspaces/t-${i}-a1/.polar`, dir: true }],
    newSession: true,
    uid: 1000,
    gid: 1000,
  };
}

/** Every mount's destination and the working directory: what the command inside can see of paths. */
function insideView(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (['--bind', '--ro-bind'].includes(args[i]!)) out.push(`${args[i]} → ${args[i + 2]}`);
    if (['--tmpfs', '--chdir'].includes(args[i]!)) out.push(`${args[i]} ${args[i + 1]}`);
  }
  return out;
}

describe('fixed paths inside the sandbox', () => {
  it('are /workspace and /home/agent where no host mount is near them', () => {
    expect(insidePaths(['/usr', '/root/polar/node_modules', '/home/alice/.nvm'])).toEqual({
      workspace: '/workspace',
      home: '/home/agent',
      polar: '/opt/polar',
    });
  });

  it("polar's install moved to the fixed path takes no path of its own (a checkout at /workspace or /opt/polar)", () => {
    expect(insidePaths(['/usr', '/workspace/polar/node_modules'], '/workspace/polar/node_modules')).toEqual({
      workspace: '/workspace',
      home: '/home/agent',
      polar: '/opt/polar',
    });
    expect(insidePaths(['/opt/polar/node_modules'], '/opt/polar/node_modules').polar).toBe('/opt/polar');
    // A toolchain under /opt is mounted at its own path: polar's files go where none is.
    expect(insidePaths(['/opt'], '/root/polar/node_modules').polar).toBe('/polar/install');
  });

  it('move aside when polar or a toolchain is mounted under, at or over one of them', () => {
    // A dev container with polar checked out in /workspace: its node_modules would show inside the agent's workspace.
    expect(insidePaths(['/workspace/polar/node_modules']).workspace).toBe('/polar/workspace');
    // A machine whose user is "agent", toolchains in its home.
    expect(insidePaths(['/home/agent/.nvm']).home).toBe('/polar/home');
    // A whole /home bound read-only: bwrap could not make the mount point in it.
    expect(insidePaths(['/home']).home).toBe('/polar/home');
    expect(() => insidePaths(['/'])).toThrow(/no fixed workspace path is free/);
  });

  it('give two samples of a task the same view: only the host sources of their mounts differ', () => {
    const a = bwrapArgs(VIEW, sample(0));
    const b = bwrapArgs(VIEW, sample(1));
    expect(insideView(a)).toEqual(insideView(b));
    expect(a.slice(a.indexOf('--chdir'), a.indexOf('--chdir') + 2)).toEqual(['--chdir', '/workspace']);
    expect(a.join(' ')).toContain('--bind /out/workspaces/t-0-a1 /workspace');
    expect(a.join(' ')).toContain('--bind /db/.polar/runs/ses_0/home /home/agent');
    // Neither the workspace nor the home appears at its host path.
    expect(insideView(a).some((m) => m.includes('/out/workspaces') || m.includes('ses_0'))).toBe(false);
  });

  it("show polar's install at the fixed path, never at the host checkout's: two installs, one view", () => {
    const at = (install: string) => bwrapArgs({ ...VIEW, dirs: ['/usr', install], install }, { ...sample(0), polarInside: '/opt/polar' });
    const a = at('/home/alice/polar/node_modules');
    const b = at('/srv/ci/checkout-2/node_modules');
    expect(insideView(a)).toEqual(insideView(b));
    expect(a.join(' ')).toContain('--ro-bind /home/alice/polar/node_modules /opt/polar/node_modules');
    expect(insideView(a).some((m) => m.includes('alice'))).toBe(false);
    // Without the fixed path (`polar run`), at its own.
    expect(bwrapArgs({ ...VIEW, install: '/opt/polar/node_modules' }, sample(0)).join(' ')).toContain(
      '--ro-bind /opt/polar/node_modules /opt/polar/node_modules',
    );
  });

  it('hide a record folder under the working directory where the command sees it', () => {
    const args = bwrapArgs(VIEW, sample(0)).join(' ');
    expect(args).toContain('--tmpfs /workspace/.polar');
    expect(args).not.toContain('--tmpfs /out/workspaces/t-0-a1/.polar');
  });
});

describe('the working directory mounted at a fixed path shares it with no other mount', () => {
  // A task file in an NGC container's working directory: its folder is /workspace, and the evaluator
  // mounts it read-only. Mounted under the sample's workspace, the agent's files would stand in for
  // the hidden checkers ($POLAR_TASKS_DIR/check.py), so bwrapArgs refuses instead of mounting.
  it.each([
    ['the same path', '/workspace'],
    ['a path under it', '/workspace/tasks'],
    ['a path above it', '/'],
  ])('refuses a read-only mount at %s', (_what, at) => {
    expect(() => bwrapArgs(VIEW, { ...sample(0), readOnly: [at] })).toThrow(/overlap the mount/);
  });

  it('refuses a bind whose destination lies under it', () => {
    expect(() => bwrapArgs(VIEW, { ...sample(0), binds: [{ source: '/srv/x', dest: '/workspace/x', readOnly: true }] })).toThrow(/overlap the mount/);
  });

  it('takes mounts beside it', () => {
    expect(() => bwrapArgs(VIEW, { ...sample(0), readOnly: ['/srv/tasks', '/workspaces-elsewhere'] })).not.toThrow();
  });
});
