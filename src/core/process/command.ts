import { execa } from 'execa';

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
