import { execa, type ResultPromise } from 'execa';
import type { CommandLine } from './command-line.js';

export interface ShellResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** The last 64 KiB of each stream. */
  stdout: string;
  stderr: string;
  /** Why the command could not be started at all. */
  failedToStart: string | null;
}

const OUTPUT_TAIL = 64 * 1024;

/** POSIX single quoting: nothing inside '…' is special, and a quote is closed, escaped, reopened. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * A task's shell command (setup, evaluator): `bash -c` in its own process group, so a timeout ends
 * everything it started; output kept as bounded tails. Never throws for the command's own failure.
 */
export async function runShell(
  command: string,
  opts: { cwd: string; env: Record<string, string>; timeoutMs: number; wrap?: (cmd: CommandLine) => CommandLine },
): Promise<ShellResult> {
  const base: CommandLine = { file: 'bash', args: ['-c', command], env: opts.env };
  const cmd = opts.wrap ? opts.wrap(base) : base;
  let stdout = '';
  let stderr = '';
  let timedOut = false;
  let child: ResultPromise;
  try {
    child = execa(cmd.file, cmd.args, { cwd: opts.cwd, env: cmd.env, extendEnv: false, reject: false, detached: true, stdin: 'ignore', buffer: false });
  } catch (err) {
    return { exitCode: null, signal: null, timedOut: false, stdout: '', stderr: '', failedToStart: (err as Error).message };
  }
  child.stdout?.on('data', (d: Buffer) => (stdout = tail(stdout + d.toString('utf8'))));
  child.stderr?.on('data', (d: Buffer) => (stderr = tail(stderr + d.toString('utf8'))));
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }, opts.timeoutMs);
  try {
    const result = await child;
    const failedToStart = result.failed && result.exitCode === undefined && !result.signal && !timedOut ? (result.shortMessage ?? 'failed to start') : null;
    return { exitCode: result.exitCode ?? null, signal: result.signal ?? null, timedOut, stdout, stderr, failedToStart };
  } finally {
    clearTimeout(timer);
  }
}

function tail(text: string): string {
  return text.length > OUTPUT_TAIL ? text.slice(text.length - OUTPUT_TAIL) : text;
}
