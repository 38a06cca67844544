import { createWriteStream } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import type { HarnessCommand } from './types.js';

export interface SpawnOptions {
  cwd: string;
  /** Interactive: the terminal is handed through. Headless: output is piped, logged and echoed. */
  interactive: boolean;
  logFile: string;
  timeoutMs?: number;
  /** Headless output also to polar's own stdout/stderr (off when polar prints JSON). */
  echo?: boolean;
  /**
   * The log file's cap in bytes (0 or absent: none). polar writes the log itself, outside the
   * sandbox's RLIMIT_FSIZE: without a cap an agent printing without end fills the disk.
   */
  logLimitBytes?: number;
}

export interface HarnessExit {
  exitCode: number;
  /** Why it ended, when polar ended it. */
  endedBy: 'timeout' | 'interrupt' | null;
}

/**
 * The one place a harness process starts. A headless harness runs in its own process group so a
 * timeout or Ctrl-C reaches its whole tree (shell tools, sub-agents), not just its first process;
 * an interactive one stays in the terminal's foreground group, where Ctrl-C reaches it directly.
 * Output goes to the log file as well as to polar's own stdout/stderr.
 */
export async function runHarnessProcess(cmd: HarnessCommand, opts: SpawnOptions): Promise<HarnessExit> {
  const log = createWriteStream(opts.logFile, { flags: 'a', mode: 0o600 });
  log.write(`# ${new Date().toISOString()} ${[cmd.file, ...cmd.args].map((a) => JSON.stringify(a)).join(' ')}\n`);
  const child: ResultPromise = execa(cmd.file, cmd.args, {
    cwd: opts.cwd,
    env: cmd.env,
    extendEnv: false,
    reject: false,
    detached: !opts.interactive,
    stdin: opts.interactive ? 'inherit' : 'ignore',
    stdout: opts.interactive ? 'inherit' : 'pipe',
    stderr: opts.interactive ? 'inherit' : 'pipe',
    buffer: false,
    cleanup: true,
  });
  if (!opts.interactive) {
    const echo = opts.echo !== false;
    const limit = opts.logLimitBytes && opts.logLimitBytes > 0 ? opts.logLimitBytes : Infinity;
    let logged = 0;
    const toLog = (d: Buffer, from: NodeJS.ReadableStream | null) => {
      if (logged >= limit) return;
      const part = logged + d.length > limit ? d.subarray(0, limit - logged) : d;
      logged += part.length;
      // Backpressure: the harness waits for the disk rather than polar buffering its output in memory.
      if (!log.write(part) && from) {
        from.pause();
        log.once('drain', () => from.resume());
      }
      if (logged >= limit) log.write(`\n# polar: the log stops here, at its cap of ${limit} bytes; the rest of the output was dropped\n`);
    };
    child.stdout?.on('data', (d: Buffer) => {
      toLog(d, child.stdout);
      if (echo) process.stdout.write(d);
    });
    child.stderr?.on('data', (d: Buffer) => {
      toLog(d, child.stderr);
      if (echo) process.stderr.write(d);
    });
  }
  let endedBy: HarnessExit['endedBy'] = null;
  const killTree = (signal: NodeJS.Signals, evenAfterExit = false) => {
    if (child.pid === undefined || (child.exitCode !== null && !evenAfterExit)) return;
    try {
      // A negative pid signals the whole process group the headless child leads.
      process.kill(opts.interactive ? child.pid : -child.pid, signal);
    } catch {
      // already gone
    }
  };
  const stop = (reason: 'timeout' | 'interrupt') => {
    endedBy ??= reason;
    killTree(reason === 'timeout' ? 'SIGTERM' : 'SIGINT');
    setTimeout(() => killTree('SIGKILL'), 5000).unref();
  };
  const timer = opts.timeoutMs ? setTimeout(() => stop('timeout'), opts.timeoutMs) : undefined;
  // Interactive: the terminal delivers Ctrl-C to the harness itself; polar just waits for it.
  const onSigint = () => {
    if (!opts.interactive) stop('interrupt');
    else endedBy ??= 'interrupt';
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigint);
  try {
    const result = await child;
    const code = typeof result.exitCode === 'number' ? result.exitCode : result.signal ? 128 + signalNumber(result.signal) : 1;
    return { exitCode: code, endedBy };
  } finally {
    if (timer) clearTimeout(timer);
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
    if (!opts.interactive) killTree('SIGKILL', true); // nothing the run started outlives it
    await new Promise<void>((resolve) => log.end(resolve));
  }
}

/** A short helper command (a `--version`, an install): its combined output and exit code, never a throw. */
export async function runCommand(
  file: string,
  args: readonly string[],
  opts: { env?: Record<string, string>; cwd?: string; timeoutMs: number },
): Promise<{ exitCode: number | null; output: string; stdout: string; failed: string | null }> {
  try {
    const result = await execa(file, args, {
      ...(opts.env ? { env: opts.env, extendEnv: false } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      timeout: opts.timeoutMs,
      reject: false,
      stdin: 'ignore',
      all: true,
      stripFinalNewline: false,
      maxBuffer: 256 * 1024 * 1024,
    });
    return {
      exitCode: result.exitCode ?? null,
      output: result.all ?? '',
      stdout: result.stdout ?? '',
      failed: result.failed ? (result.shortMessage ?? 'failed') : null,
    };
  } catch (err) {
    return { exitCode: null, output: '', stdout: '', failed: (err as Error).message };
  }
}

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

/**
 * A task's shell command (setup, evaluator): `bash -c` in its own process group, so a timeout ends
 * everything it started; output kept as bounded tails. Never throws for the command's own failure.
 */
export async function runShell(
  command: string,
  opts: { cwd: string; env: Record<string, string>; timeoutMs: number; wrap?: (cmd: HarnessCommand) => HarnessCommand },
): Promise<ShellResult> {
  const base: HarnessCommand = { file: 'bash', args: ['-c', command], env: opts.env };
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

/** A long-running child (a trainer): its own process group, every line logged and handed on. */
export interface Supervised {
  readonly pid: number | undefined;
  /** Resolves with the exit code (128 + n for a signal) once the child has ended. */
  readonly done: Promise<number>;
  /** Signals the whole process group (Ctrl-C forwarded: SIGINT; a second: SIGKILL). */
  signal(signal: NodeJS.Signals): void;
}

export function startSupervised(cmd: HarnessCommand, opts: { cwd: string; logFile: string; onLine?: (line: string) => void }): Supervised {
  const log = createWriteStream(opts.logFile, { flags: 'a', mode: 0o600 });
  log.write(`# ${new Date().toISOString()} ${[cmd.file, ...cmd.args].map((a) => JSON.stringify(a)).join(' ')}\n`);
  const child = execa(cmd.file, cmd.args, {
    cwd: opts.cwd,
    env: cmd.env,
    extendEnv: false,
    reject: false,
    detached: true,
    stdin: 'ignore',
    buffer: false,
    all: true,
  });
  let partial = '';
  child.all?.on('data', (d: Buffer) => {
    log.write(d);
    const text = partial + d.toString('utf8');
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) opts.onLine?.(line);
  });
  const done = (async () => {
    const result = await child;
    if (partial) opts.onLine?.(partial);
    await new Promise<void>((resolve) => log.end(resolve));
    if (typeof result.exitCode === 'number') return result.exitCode;
    return result.signal ? 128 + signalNumber(result.signal) : 1;
  })();
  return {
    pid: child.pid,
    done,
    signal(signal) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // already gone
      }
    },
  };
}

function tail(text: string): string {
  return text.length > OUTPUT_TAIL ? text.slice(text.length - OUTPUT_TAIL) : text;
}

function signalNumber(signal: string): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[signal] ?? 1;
}
