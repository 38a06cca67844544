import { describe, expect, it } from 'vitest';
import { bwrapArgs, type SandboxSpec } from './args.js';
import type { HostView } from './view.js';

const VIEW: HostView = { dirs: ['/usr'], symlinks: [], etc: '/tmp/polar-etc-x', masked: [] };
const SPEC: SandboxSpec = {
  cwd: '/tmp/out/workspaces/t-0',
  writable: ['/tmp/home'],
  readOnly: [],
  tmp: '/tmp/sbx/tmp',
  varTmp: '/tmp/sbx/var-tmp',
  network: 'none',
  newSession: true,
  uid: 0,
  gid: 0,
};

/** (flag, source, destination) for every bind, in order. */
function binds(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) if (['--bind', '--ro-bind'].includes(args[i]!)) out.push(`${args[i]} ${args[i + 1]} ${args[i + 2]}`);
  return out;
}

describe("bwrapArgs with a Harbor task's container paths", () => {
  it('mounts the workspace at WORKDIR only (not at its host path), /logs writable, /tests read-only, and starts in WORKDIR', () => {
    const args = bwrapArgs(VIEW, {
      ...SPEC,
      cwdInside: '/app',
      binds: [
        { source: '/tmp/out/workspaces/t-0-logs', dest: '/logs', readOnly: false },
        { source: '/tasks/t/tests', dest: '/tests', readOnly: true },
      ],
    });
    const b = binds(args);
    expect(b).toContain('--bind /tmp/out/workspaces/t-0 /app');
    expect(b).toContain('--bind /tmp/out/workspaces/t-0-logs /logs');
    expect(b).toContain('--ro-bind /tasks/t/tests /tests');
    expect(b.some((x) => x.endsWith(' /tmp/out/workspaces/t-0'))).toBe(false);
    expect(args.slice(args.indexOf('--chdir'), args.indexOf('--chdir') + 2)).toEqual(['--chdir', '/app']);
  });

  it('without them, the workspace is at its own path as before', () => {
    const args = bwrapArgs(VIEW, SPEC);
    expect(binds(args)).toContain('--bind /tmp/out/workspaces/t-0 /tmp/out/workspaces/t-0');
    expect(args.slice(args.indexOf('--chdir'), args.indexOf('--chdir') + 2)).toEqual(['--chdir', '/tmp/out/workspaces/t-0']);
  });
});
