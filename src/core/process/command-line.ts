/** A command line ready to spawn; `env` is complete (not merged with polar's own environment). */
export interface CommandLine {
  file: string;
  args: string[];
  env: Record<string, string>;
}

/** The exit status a shell would report: the code, or 128 + n for a signal. */
export function exitStatus(result: { exitCode?: number | undefined; signal?: string | undefined }): number {
  if (typeof result.exitCode === 'number') return result.exitCode;
  return result.signal ? 128 + signalNumber(result.signal) : 1;
}

function signalNumber(signal: string): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[signal] ?? 1;
}
