import { execa } from 'execa';

export interface CommandResult {
  exitCode: number | null;
  /** stdout and stderr as they came. */
  output: string;
  stdout: string;
  stderr: string;
  signal: string | null;
  timedOut: boolean;
  /** Why it could not start (`spawn git ENOENT`); null when it ran. */
  startError: string | null;
  /** execa's one-line account of a failure (it starts with the command line); null when it succeeded. */
  failed: string | null;
  /**
   * The failure as an error (execa's, with the whole command line, exit code and output), for a
   * caller that reports the failure in its own words to keep as `cause`; null when it succeeded.
   */
  error: Error | null;
}

/**
 * A short helper command (a `--version`, an install, polar's git): its output and how it ended,
 * never a throw. commandFailure (failure.ts) turns a failed one into the tool's own reason.
 */
export async function runCommand(
  file: string,
  args: readonly string[],
  opts: { env?: Record<string, string>; cwd?: string; timeoutMs: number },
): Promise<CommandResult> {
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
    const timedOut = result.timedOut === true;
    return {
      exitCode: result.exitCode ?? null,
      output: result.all ?? '',
      stdout: result.stdout ?? '',
      stderr: result.stderr ?? '',
      signal: result.signal ?? null,
      timedOut,
      startError:
        result.failed && result.exitCode === undefined && !result.signal && !timedOut ? (result.originalMessage ?? result.shortMessage ?? 'failed') : null,
      failed: result.failed ? (result.shortMessage ?? 'failed') : null,
      // With reject: false, execa hands back a failed run as its error object instead of throwing it.
      error: result.failed ? (result as unknown as Error) : null,
    };
  } catch (err) {
    const message = (err as Error).message;
    return { exitCode: null, output: '', stdout: '', stderr: '', signal: null, timedOut: false, startError: message, failed: message, error: err as Error };
  }
}
