import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../sandbox/index.js';
import { removeTree } from '../../../test/support/remove-tree.js';
import {
  buildArgs,
  containerName,
  contextHash,
  copyInArgs,
  copyOutArgs,
  execArgs,
  imageTag,
  inspectImageArgs,
  networkCreateArgs,
  removeArgs,
  runArgs,
  volume,
} from './engine-args.js';

const made: string[] = [];
afterEach(() => {
  for (const d of made.splice(0)) removeTree(d);
});

function context(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-ctx-'));
  made.push(dir);
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}

describe('contextHash', () => {
  const files = { Dockerfile: 'FROM debian\nCOPY app /app\n', 'app/main.py': 'print(1)\n' };

  it('is the same for the same content in another folder, and changes with one byte, a name or the exec bit', () => {
    const a = context(files);
    const b = context(files);
    expect(contextHash(a)).toBe(contextHash(b));
    fs.writeFileSync(path.join(b, 'app/main.py'), 'print(2)\n');
    expect(contextHash(b)).not.toBe(contextHash(a));
    const c = context({ Dockerfile: files.Dockerfile, 'app/other.py': 'print(1)\n' });
    expect(contextHash(c)).not.toBe(contextHash(a));
    const d = context(files);
    fs.chmodSync(path.join(d, 'app/main.py'), 0o755);
    expect(contextHash(d)).not.toBe(contextHash(a));
  });

  it('follows a Dockerfile change', () => {
    const a = context(files);
    const b = context({ ...files, Dockerfile: 'FROM debian\nRUN true\nCOPY app /app\n' });
    expect(contextHash(a)).not.toBe(contextHash(b));
  });
});

describe('image and container names', () => {
  it('makes a tag the engines accept from any task name', () => {
    expect(imageTag('Fix_Failing.Test', 'ab'.repeat(32))).toBe('polar-harbor/fix_failing.test:abababababababab');
    expect(imageTag('org/Task Name!', 'c'.repeat(64))).toBe('polar-harbor/org-task-name:cccccccccccccccc');
    expect(imageTag('---', 'd'.repeat(64))).toBe('polar-harbor/task:dddddddddddddddd');
  });

  it('names a container after its sample', () => {
    expect(containerName('smp_01H/x y')).toBe('polar-smp_01H-x-y');
  });
});

describe('engine argv', () => {
  it('inspects, builds, copies and removes', () => {
    expect(inspectImageArgs('polar-harbor/t:1')).toEqual(['image', 'inspect', 'polar-harbor/t:1']);
    expect(buildArgs('polar-harbor/t:1', '/tasks/t/environment')).toEqual([
      'build',
      '-t',
      'polar-harbor/t:1',
      '-f',
      '/tasks/t/environment/Dockerfile',
      '/tasks/t/environment',
    ]);
    expect(copyInArgs('polar-s', '/tasks/t/tests/', '/tests')).toEqual(['cp', '/tasks/t/tests/.', 'polar-s:/tests']);
    expect(copyOutArgs('polar-s', '/logs/verifier', '/out/v')).toEqual(['cp', 'polar-s:/logs/verifier/.', '/out/v']);
    expect(removeArgs('polar-s')).toEqual(['rm', '-f', 'polar-s']);
  });

  it('runs one long-lived container with the caps, the network and read-only mounts', () => {
    const args = runArgs({
      name: 'polar-s1',
      image: 'polar-harbor/t:1',
      hostname: 'polar-sandbox',
      network: { kind: 'none' },
      mounts: [
        { source: '/opt/node', dest: '/opt/node', readOnly: true },
        { source: '/tmp/px/proxy.sock', dest: '/run/polar/proxy.sock', readOnly: false },
      ],
      limits: { ...DEFAULT_LIMITS, maxProcs: 512, maxMemoryBytes: 2 * 1024 ** 3, maxFileSizeBytes: 1024 ** 2 },
      cpus: 2,
    });
    // A fixed hostname, as bwrap's: the engine's default (the container id) differs per sample, and
    // a harness may put it in the first prompt that NeMo-RL groups samples by.
    expect(args.slice(0, 8)).toEqual(['run', '-d', '--rm', '--init', '--name', 'polar-s1', '--hostname', 'polar-sandbox']);
    // No --workdir: podman 4.3 will not start a container whose --workdir the image lacks; the
    // workspace folder is made after the start and every exec names it.
    expect(args).not.toContain('--workdir');
    const flagValue = (flag: string) => args[args.indexOf(flag) + 1];
    expect(flagValue('--network')).toBe('none');
    expect(flagValue('--pids-limit')).toBe('512');
    expect(flagValue('--memory')).toBe(`${2 * 1024 ** 3}b`);
    // The file size cap is set per exec (an engine's --ulimit replaces its configured defaults).
    expect(args).not.toContain('--ulimit');
    expect(flagValue('--cpus')).toBe('2');
    expect(args.filter((_, i) => args[i - 1] === '-v')).toEqual(['/opt/node:/opt/node:ro', '/tmp/px/proxy.sock:/run/polar/proxy.sock']);
    // Harbor's keep-alive as the CMD, never --entrypoint: the image's ENTRYPOINT (its services) runs.
    expect(args.slice(-4)).toEqual(['polar-harbor/t:1', 'sh', '-c', 'sleep infinity']);
    expect(args).not.toContain('--entrypoint');
  });

  it('leaves the default network, and caps of 0, alone', () => {
    const args = runArgs({
      name: 'n',
      image: 'i',
      network: { kind: 'internet' },
      mounts: [],
      limits: { maxProcs: 0, maxMemoryBytes: 0, maxFileSizeBytes: 0, maxCpuSeconds: 0 },
      cpus: null,
    });
    for (const flag of ['--network', '--pids-limit', '--memory', '--ulimit', '--cpus', '-v']) expect(args).not.toContain(flag);
  });

  it("a compose service's box: on its network under its aliases, its variables by name, its entrypoint and command", () => {
    const args = runArgs({
      name: 'polar-s1-api',
      image: 'polar-harbor/t-api:1',
      network: { kind: 'attach', network: 'polar-s1', aliases: ['api', 'api.local'] },
      mounts: [],
      limits: { maxProcs: 0, maxMemoryBytes: 0, maxFileSizeBytes: 0, maxCpuSeconds: 0 },
      cpus: null,
      envNames: ['PORT', 'MODE'],
      entrypoint: ['perl', '-e'],
      command: ['print 1'],
    });
    const flags = args.slice(0, args.indexOf('polar-harbor/t-api:1'));
    const flagValues = (flag: string) => flags.flatMap((a, i) => (flags[i - 1] === flag ? [a] : []));
    expect(flagValues('--network')).toEqual(['polar-s1']);
    expect(flagValues('--network-alias')).toEqual(['api', 'api.local']);
    // Values never on the argv: the engine reads each from its client's environment.
    expect(flagValues('-e')).toEqual(['PORT', 'MODE']);
    expect(args).not.toContain('--hostname');
    // The CLI takes one program for --entrypoint: the list's rest leads the command.
    expect(flagValues('--entrypoint')).toEqual(['perl']);
    expect(args.slice(-3)).toEqual(['polar-harbor/t-api:1', '-e', 'print 1']);
    // An empty entrypoint clears the image's.
    const cleared = runArgs({ name: 'n', image: 'i', network: { kind: 'none' }, mounts: [], limits: DEFAULT_LIMITS, cpus: null, entrypoint: [] });
    expect(cleared.slice(cleared.indexOf('--entrypoint'), cleared.indexOf('--entrypoint') + 2)).toEqual(['--entrypoint', '']);
    // podman's networks are isolated from each other only with `isolate` (network-isolation.test.ts).
    expect(networkCreateArgs('podman', 'polar-s1', true)).toEqual(['network', 'create', '-o', 'isolate=true', '--internal', 'polar-s1']);
    expect(networkCreateArgs('podman', 'polar-s1', false)).toEqual(['network', 'create', '-o', 'isolate=true', 'polar-s1']);
    expect(networkCreateArgs('docker', 'polar-s1', false)).toEqual(['network', 'create', 'polar-s1']);
  });

  it('refuses a mount path the engine would split, or a relative one', () => {
    expect(() => volume({ source: '/a:b', dest: '/a', readOnly: true })).toThrow(/':' or ','/);
    expect(() => volume({ source: '/a', dest: 'rel', readOnly: true })).toThrow(/absolute/);
  });

  it('passes variables by name only, so their values never reach a command line', () => {
    expect(execArgs({ name: 'polar-s', workdir: '/app', envNames: ['OPENAI_API_KEY', 'HOME'], interactive: false }, ['node', 'cli.js'])).toEqual([
      'exec',
      '-w',
      '/app',
      '-e',
      'OPENAI_API_KEY',
      '-e',
      'HOME',
      'polar-s',
      'node',
      'cli.js',
    ]);
    expect(execArgs({ name: 'p', workdir: '/w', envNames: [], interactive: true }, ['sh'])).toEqual(['exec', '-i', '-w', '/w', 'p', 'sh']);
  });

  it('starts each command under the file size cap, in 512-byte blocks, with its argv untouched', () => {
    const args = execArgs({ name: 'p', workdir: '/w', envNames: [], interactive: false, maxFileSizeBytes: 1024 ** 2 }, ['bash', '-c', 'echo "$1"', 'x y']);
    expect(args).toEqual(['exec', '-w', '/w', 'p', 'sh', '-c', 'ulimit -f 2048 && exec "$@"', 'sh', 'bash', '-c', 'echo "$1"', 'x y']);
  });
});
