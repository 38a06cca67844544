import { execFileSync, spawn, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execArgs, removeArgs, runArgs } from '../../src/rollout/boxes/engine-args.js';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { DEFAULT_LIMITS, findBwrap } from '../../src/sandbox/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 31, the inherited descriptor: polar started with a host folder open on fd 20 (`exec
 * 20</some/dir` in the launching shell, a CI step, a wrapper) and a launcher's pipe on fd 21. Node
 * does not close them in its children, and bwrap passes every open descriptor on, so the agent read
 * and wrote the folder through /proc/self/fd/20 and wrote into the pipe. Here a stand-in for polar
 * (test/support/jail-fds.mjs, the built sandbox) is started with both, and runs one sandboxed
 * command that tries each: it must hold only 0, 1 and 2, and the host must show no trace.
 */
const STAND_IN = path.resolve(__dirname, '../support/jail-fds.mjs');
const bwrap = findBwrap();

describe.skipIf(!bwrap)('descriptors polar inherited (skipped: bubblewrap is not installed)', () => {
  let root: string;
  let hostDir: string;
  let workspace: string;

  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-inherited-fds-'));
    hostDir = path.join(root, 'host');
    workspace = path.join(root, 'workspace');
    fs.mkdirSync(hostDir);
    fs.mkdirSync(workspace);
    fs.writeFileSync(path.join(hostDir, 'secret.txt'), 'HOST-SECRET\n');
  });
  afterAll(() => removeTree(root));

  it('a folder on fd 20 and a pipe on fd 21 of the launcher are out of reach of a sandboxed command', async () => {
    const attack = [
      // ls's own listing descriptor shows as /proc/N/fd; the test leaves it out.
      'ls -l /proc/self/fd',
      'cat /proc/self/fd/20/secret.txt && echo READ-THROUGH-20',
      'echo planted > /proc/self/fd/20/planted && echo WROTE-THROUGH-20',
      'cat /proc/$$/fd/20/secret.txt && echo SHELL-READ-THROUGH-20',
      'echo into-the-pipe >&21 && echo WROTE-PIPE-21',
      'true',
    ].join('; ');
    const folder = fs.openSync(hostDir, 'r');
    const stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
    for (let fd = 3; fd <= 21; fd++) stdio.push('ignore');
    stdio[20] = folder;
    stdio[21] = 'pipe';
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(process.execPath, [STAND_IN, workspace, attack], { stdio });
    } finally {
      fs.closeSync(folder);
    }
    let out = '';
    let err = '';
    let piped = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
    (child.stdio[21 as number] as unknown as Readable).on('data', (d: Buffer) => (piped += d.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, err).toBe(0);
    const r = JSON.parse(out) as { exitCode: number; stdout: string; stderr: string };
    expect(r.exitCode, r.stderr).toBe(0);
    const open = r.stdout
      .split('\n')
      .map((l) => /(\d+) -> (.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null && !/^\/proc\/\d+\/fd$/.test(m[2]!))
      .map((m) => Number(m[1]));
    open.sort((a, b) => a - b);
    expect(open, r.stdout).toEqual([0, 1, 2]);
    expect(r.stdout).not.toMatch(/HOST-SECRET|READ-THROUGH|WROTE-THROUGH|WROTE-PIPE/);
    expect(fs.readdirSync(hostDir)).toEqual(['secret.txt']);
    expect(piped).toBe('');
  });
});

/**
 * A container sample's commands are started by the engine, not by a shell polar spawned: podman
 * passes a descriptor on only with --preserve-fds (conmon starts the container's processes), docker's
 * CLI only asks its daemon. polar's own `run` and `exec` lines, spawned with the same fd 20, must
 * leave nothing of it in the container: no process there holds a descriptor 20.
 */
const IMAGE = 'docker.io/library/debian:12-slim';
const engine = workingEngines()[0] ?? null;
const imageHere = engine !== null && spawnOk(engine, ['image', 'inspect', IMAGE]);

function spawnOk(file: string, args: string[]): boolean {
  try {
    execFileSync(file, args, { stdio: 'ignore', timeout: patient(60_000) });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!imageHere)(`descriptors polar inherited, in a container (skipped: no container engine with ${IMAGE} here)`, () => {
  it("reach no process of the sample's container, started or exec'd", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-inherited-fds-ctr-'));
    const folder = fs.openSync(root, 'r');
    const name = `polar-fds-${process.pid}`;
    const withFd = async (args: string[]) => {
      const stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
      for (let fd = 3; fd <= 20; fd++) stdio.push('ignore');
      stdio[20] = folder;
      const child = spawn(engine!, args, { stdio });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      return { code, out };
    };
    try {
      const limits = { ...DEFAULT_LIMITS, maxMemoryBytes: 0 };
      const started = await withFd(runArgs({ name, image: IMAGE, network: { kind: 'none' }, mounts: [], limits, cpus: null }));
      expect(started.code, started.out).toBe(0);
      const probe = 'echo holders:; ls -d /proc/[0-9]*/fd/20 2>/dev/null; echo own:; ls /proc/self/fd';
      const r = await withFd(execArgs({ name, workdir: '/', envNames: [], interactive: false }, ['sh', '-c', probe]));
      expect(r.code, r.out).toBe(0);
      const [, holders, own] = /holders:\n([\s\S]*)own:\n([\s\S]*)$/.exec(r.out) ?? [];
      expect(holders!.trim()).toBe('');
      // sh's listing itself opens one more (3), as on the host.
      expect(
        own!
          .trim()
          .split(/\s+/)
          .filter((fd) => fd !== '3'),
      ).toEqual(['0', '1', '2']);
    } finally {
      fs.closeSync(folder);
      spawnOk(engine!, removeArgs(name));
      removeTree(root);
    }
  });
});
