import os from 'node:os';
import { StageError } from '../stage-error.js';
import type { VerifierRun } from '../environments/types.js';

/**
 * What a verifier run that did not end on its own terms means. Everything here happens after the
 * agent ended, while its code may run under the verifier (a test imports its module, test.sh runs
 * its program), so the agent could have caused it: a child that kills its checker, a loop that
 * outlives the timeout, a fork bomb. None of that may earn a reward (a reward file it left is not
 * read) and none may turn into `error`, which would drop the sample out of its GRPO group instead
 * of scoring it: the sample scores 0 and the reason is kept. Only what the agent cannot cause (polar
 * could not start the command) is the machine's failure, thrown as StageError (the sample ends
 * `error`).
 */
export function forfeit(r: VerifierRun, what: string, timeoutSec: number): string | null {
  if (r.failedToStart) throw new StageError('post', `${what} could not start: ${r.failedToStart}`);
  if (r.limit) return `${what}: ${r.limit}`;
  if (r.timedOut) return `${what} timed out after ${timeoutSec} s`;
  if (r.signal) return `${what} was killed by ${r.signal}`;
  const killed = killedBy(r.exitCode);
  if (killed) return `${what} exited ${r.exitCode}: killed by ${killed}, so its reward files and output are not trusted`;
  return null;
}

/**
 * The signal a shell's exit status reports (128 + n, bash's and sh's convention for a command that
 * died by signal n): a checker killed by a child it ran makes test.sh exit 137 "on its own".
 */
export function killedBy(exitCode: number | null): string | null {
  if (exitCode === null || exitCode <= 128 || exitCode > 128 + 64) return null;
  const n = exitCode - 128;
  const name = Object.entries(os.constants.signals).find(([, v]) => v === n)?.[0];
  return name ?? `signal ${n}`;
}
