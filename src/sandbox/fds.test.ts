import { spawn, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from './types.js';
import { checkInheritedFds, closeFdsScript, enterShell, inheritableFds } from './fds.js';
import { enterScript } from './limits.js';
import { removeTree } from '../../test/support/remove-tree.js';

/**
 * The enter script's first words close what polar inherited. Run here with real bash and dash and
 * descriptors 5 and 20 open in the shell, as a launcher would leave them: what the command exec'd
 * after them still holds is read from its own /proc/self/fd.
 */
let dir: string;
let folder: number;
let file: number;
/**
 * What this test process itself inherited and passes on (where these tests ran first, the tool that
 * started vitest left a pipe at 251): every child holds these too, unless a script closes them.
 */
let ambient: number[];
/** `fds` with the ambient ones at or above `min`, sorted. */
const plus = (fds: number[], min = 3) => [...new Set([...fds, ...ambient.filter((fd) => fd >= min)])].sort((a, b) => a - b);

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-fds-'));
  folder = fs.openSync(dir, 'r');
  file = fs.openSync(path.join(dir, 'pipe-ish'), 'w');
  ambient = inheritableFds(3);
});
afterAll(() => {
  fs.closeSync(folder);
  fs.closeSync(file);
  removeTree(dir);
});

/** stdio with `folder` at 20 and `file` at 5 in the child. */
function withFds(): StdioOptions {
  const stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
  for (let fd = 3; fd <= 20; fd++) stdio.push('ignore');
  stdio[5] = file;
  stdio[20] = folder;
  return stdio;
}

/** The descriptors `ls` found open in itself, less the one it opened to list them. */
async function openIn(shell: string, script: string, flags: string[] = []): Promise<number[]> {
  const child = spawn(shell, [...flags, '-c', `${script}; exec "$@"`, 'sh', 'ls', '-l', '/proc/self/fd'], { stdio: withFds() });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code).toBe(0);
  return out
    .split('\n')
    .map((l) => /(\d+) -> (.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && !/^\/proc\/\d+\/fd$/.test(m[2]!))
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

describe('closing inherited descriptors', () => {
  it('the child really holds them without the script (the test can see a leak)', async () => {
    expect(await openIn('/bin/sh', 'true')).toEqual(plus([0, 1, 2, 5, 20]));
  });

  it.skipIf(!fs.existsSync('/bin/bash'))('bash closes every one above 2, 20 included', async () => {
    expect(await openIn('/bin/bash', closeFdsScript(true), ['-p'])).toEqual([0, 1, 2]);
  });

  it('sh closes those up to 9 (a POSIX redirection names one digit); above 9 is for checkInheritedFds', async () => {
    expect(await openIn('/bin/sh', closeFdsScript(false))).toEqual(plus([0, 1, 2, 20], 10));
  });

  it('finds the descriptors a child would inherit, not close-on-exec ones', async () => {
    const child = spawn('sleep', ['30'], { stdio: withFds() });
    try {
      // spawn returns once the child has exec'd: its table is what it inherited.
      expect(inheritableFds(3, child.pid!)).toEqual(plus([5, 20]));
      expect(inheritableFds(10, child.pid!)).toEqual(plus([20], 10));
    } finally {
      child.kill('SIGKILL');
    }
    // Node opens its own with O_CLOEXEC: this test process holds `folder` and `file`, no child would.
    expect(inheritableFds(3)).not.toContain(folder);
    expect(inheritableFds(3)).not.toContain(file);
  });

  it('without bash, refuses to start while a descriptor above 9 would reach the command, saying how to close it', () => {
    expect(() => checkInheritedFds({ file: '/bin/sh', flags: [], bash: false }, () => [20])).toThrow(/descriptor 20 open.*install bash.*exec 20>&-/);
    expect(() => checkInheritedFds({ file: '/bin/sh', flags: [], bash: false }, () => [])).not.toThrow();
    expect(() => checkInheritedFds({ file: '/bin/bash', flags: ['-p'], bash: true }, () => [20])).not.toThrow();
  });

  it("the enter shell runs outside the sandbox and takes no code from the command's environment (BASH_ENV, exported functions)", async () => {
    const shell = enterShell();
    const marker = path.join(dir, 'ran-outside');
    const sourced = path.join(dir, 'bash-env');
    fs.writeFileSync(sourced, `touch ${marker}-bash-env\n`);
    const script = enterScript([], { ...DEFAULT_LIMITS, maxFileSizeBytes: 1024 * 1024 }, false, shell.bash);
    const child = spawn(shell.file, [...shell.flags, '-c', script, 'sh', 'true'], {
      stdio: 'ignore',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BASH_ENV: sourced, 'BASH_FUNC_ulimit%%': `() { touch ${marker}-function; }` },
    });
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(0);
    expect(fs.readdirSync(dir).filter((f) => f.startsWith('ran-outside'))).toEqual([]);
  });
});
