import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Engine } from './engine-args.js';
import type { ExecResult } from './types.js';

/** The process side of an engine's CLI: one client process per call, its output's tail kept. */

export type EngineResult = ExecResult;

const OUTPUT_KEPT = 8 * 1024;

/** Runs `<engine> args…` and collects its output (the tail, bounded). */
export function runEngine(
  engine: Engine,
  args: readonly string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    /**
     * At the timeout, the client's descendants are killed and the client gets SIGTERM, then
     * SIGKILL only this long after: a `podman build` killed, or sent SIGTERM, leaves its RUN step
     * running (runc starts it in a session of its own, under the client's process tree).
     */
    termGraceMs?: number;
  } = {},
): Promise<EngineResult> {
  return new Promise((resolve) => {
    const child = spawn(engine, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const keep = (s: string, d: Buffer) => (s + d.toString()).slice(-OUTPUT_KEPT);
    child.stdout.on('data', (d: Buffer) => {
      stdout = keep(stdout, d);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr = keep(stderr, d);
    });
    let grace: NodeJS.Timeout | undefined;
    const timer = opts.timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          if (opts.termGraceMs === undefined) child.kill('SIGKILL');
          else {
            const tree = child.pid === undefined ? [] : descendants(child.pid);
            child.kill('SIGTERM');
            for (const pid of tree) {
              try {
                process.kill(pid, 'SIGKILL');
              } catch {
                // Gone already.
              }
            }
            grace = setTimeout(() => child.kill('SIGKILL'), opts.termGraceMs);
          }
        }, opts.timeoutMs)
      : undefined;
    child.on('close', () => clearTimeout(grace));
    child.on('error', (err) => {
      if (timer) clearTimeout(timer);
      resolve({ code: null, stdout, stderr: `${stderr}${err.message}`, timedOut });
    });
    child.on('close', (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/** Every process below `root` (by /proc's parent links), deepest last; empty where /proc cannot be read. */
export function descendants(root: number): number[] {
  const parent = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  for (const e of entries) {
    try {
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parent.set(ppid, [...(parent.get(ppid) ?? []), Number(e)]);
    } catch {
      // It ended while we read.
    }
  }
  const out: number[] = [];
  let next = [root];
  while (next.length > 0) {
    next = next.flatMap((p) => parent.get(p) ?? []);
    out.push(...next);
  }
  return out;
}
