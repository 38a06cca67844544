import { runCommand } from '../core/process/command.js';
import type { Harness, HarnessContext } from '../harness/types.js';

/** The harness's own `--version`, best effort (null when it will not say within 15 s). */
export async function harnessVersionOf(harness: Harness, bin: string, ctx: HarnessContext, baseEnv: Record<string, string>): Promise<string | null> {
  if (harness.packageName === null) return null;
  const env = harness.command(bin, ctx, 'version', [], baseEnv).env;
  // Some CLIs (Pi) print their version on stderr.
  const { output } = await runCommand(bin, ['--version'], { env, timeoutMs: 15_000 });
  const line = output.split('\n').find((l) => /\d+\.\d+/.test(l));
  return line ? (/\d+\.\d+\.\d+[\w.-]*/.exec(line)?.[0] ?? line.trim()) : null;
}
