import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { currentProcess, ownerState } from './owner.js';

/** State and start ticks (fields 3 and 22) of /proc/<pid>/stat, read here rather than through owner.ts. */
function stat(pid: number): { state: string; ticks: number } {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { state: fields[0]!, ticks: Number(fields[19]) };
}

const parents: number[] = [];

afterEach(() => {
  for (const pid of parents.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/**
 * A real zombie: a shell starts `sleep` in the background, prints its pid and execs into a `sleep`
 * of its own, which never waits. Once the parent is that `sleep`, the test kills the child: it stays
 * unreaped (state Z) while its parent lives. Killing it only after the exec matters: a shell that
 * still runs may reap it. (Node reaps its own children, so the zombie must belong to another process.)
 */
async function zombie(): Promise<number> {
  const parent = spawn('sh', ['-c', 'sleep 600 & echo $!; exec sleep 600'], { stdio: ['ignore', 'pipe', 'ignore'] });
  parents.push(parent.pid!);
  const line = await new Promise<string>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  const pid = Number(line);
  parents.push(pid);
  while (fs.readFileSync(`/proc/${parent.pid}/comm`, 'utf8').trim() !== 'sleep') await new Promise((r) => setTimeout(r, 10));
  process.kill(pid, 'SIGKILL');
  // SIGKILL is delivered asynchronously: wait until the child is a zombie.
  while (stat(pid).state !== 'Z') await new Promise((r) => setTimeout(r, 10));
  return pid;
}

it.skipIf(!fs.existsSync('/proc/self/stat'))('treats a killed owner that is not yet reaped (a zombie) as gone', async () => {
  const pid = await zombie();
  // kill(0) still succeeds on a zombie: that alone would call it alive.
  expect(() => process.kill(pid, 0)).not.toThrow();
  const here = currentProcess();
  const { ticks } = stat(pid);
  expect(ownerState({ host: here.host, pid, bootId: here.bootId, startTicks: ticks }, here)).toBe('gone');
  expect(ownerState({ host: here.host, pid, bootId: here.bootId, startTicks: null }, here)).toBe('gone');
});

it.skipIf(!fs.existsSync('/proc/self/stat'))('a running owner is alive, one that exited is gone', async () => {
  const here = currentProcess();
  const live = spawn('sleep', ['600'], { stdio: 'ignore' });
  parents.push(live.pid!);
  await new Promise((r) => live.once('spawn', r));
  expect(ownerState({ host: here.host, pid: live.pid!, bootId: here.bootId, startTicks: null }, here)).toBe('alive');
  expect(ownerState(here, here)).toBe('alive');
  const done = Number(execFileSync('sh', ['-c', 'sleep 0 & echo $!; wait']).toString().trim());
  expect(ownerState({ host: here.host, pid: done, bootId: here.bootId, startTicks: null }, here)).toBe('gone');
});
