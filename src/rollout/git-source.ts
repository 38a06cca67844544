import { spawnSync } from 'node:child_process';
import { isFile } from '../core/fs-kind.js';
import { commandFailure } from '../core/process/failure.js';

/**
 * Why git cannot clone a task's local `workspace.git` source, in git's own words; null when it can.
 * Asked once per task file, before anything starts (issue 40): a folder that is no repository
 * otherwise failed every sample at INIT. Asked as `git clone` reads the source: a file is a bundle
 * (`git bundle list-heads`), a folder a repository, bare or not (`git ls-remote`, clone's own
 * transport; `rev-parse` would accept a plain folder inside some other repository, which clone
 * refuses). Run with the user's git configuration, as the clone is.
 */
export function gitSourceProblem(source: string): string | null {
  const bundle = isFile(source);
  const args = bundle ? ['bundle', 'list-heads', source] : ['ls-remote', '--', source, 'HEAD'];
  const r = spawnSync('git', args, {
    env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
    timeout: 60_000,
  });
  const timedOut = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
  if (r.status === 0 && !r.error) return null;
  return commandFailure(bundle ? 'git bundle list-heads' : 'git ls-remote', {
    exitCode: r.status,
    signal: r.signal,
    timedOut,
    startError: r.error && !timedOut ? r.error.message : null,
    stderr: r.stderr ?? '',
  });
}
