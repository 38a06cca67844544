import { createWriteStream } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import { type CommandLine, exitStatus } from './command-line.js';
import { LineDropper } from './drop-lines.js';

export interface SpawnOptions {
  cwd: string;
  /** Interactive: the terminal is handed through. Headless: output is piped, logged and echoed. */
  interactive: boolean;
  logFile: string;
  timeoutMs?: number;
  /**
   * Headless output also to polar's own stdout/stderr (off when polar prints JSON); `'stderr'`: only
   * the harness's stderr (its stdout, often a JSON event stream, goes to the log file alone).
   */
  echo?: boolean | 'stderr';
  /** Lines of the harness's stderr that start with one of these go to the log file only, not the echo. */
  logOnlyStderr?: readonly string[];
  /**
   * The log file's cap in bytes (0 or absent: none). polar writes the log itself, outside the
   * sandbox's RLIMIT_FSIZE: without a cap an agent printing without end fills the disk.
   */
  logLimitBytes?: number;
  /** Ends the harness as Ctrl-C would (its process group, SIGINT then SIGKILL): `polar serve`'s cancel and early stop. */
  signal?: AbortSignal;
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
 * Output goes to the log file as well as (see `echo`) to polar's own stdout/stderr.
 */
export async function runHarnessProcess(cmd: CommandLine, opts: SpawnOptions): Promise<HarnessExit> {
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
    const echoOut = opts.echo === undefined || opts.echo === true;
    const echoErr = opts.echo !== false;
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
      if (echoOut) process.stdout.write(d);
    });
    const errEcho = new LineDropper(opts.logOnlyStderr ?? []);
    const echoStderr = (d: Buffer) => {
      if (echoErr && d.length > 0) process.stderr.write(d);
    };
    child.stderr?.on('data', (d: Buffer) => {
      toLog(d, child.stderr);
      echoStderr(errEcho.write(d));
    });
    child.stderr?.on('end', () => echoStderr(errEcho.end()));
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
  const onAbort = () => stop('interrupt');
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const result = await child;
    return { exitCode: exitStatus(result), endedBy };
  } finally {
    if (timer) clearTimeout(timer);
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
    opts.signal?.removeEventListener('abort', onAbort);
    if (!opts.interactive) killTree('SIGKILL', true); // nothing the run started outlives it
    await new Promise<void>((resolve) => log.end(resolve));
  }
}
