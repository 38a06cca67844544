import { execFileSync } from 'node:child_process';
import { PolarError } from '../../core/errors.js';

/**
 * Where a Harbor task's trial runs. `host`: polar's sandbox gives the container's paths (rollout/
 * harbor/trial.ts). `docker`/`podman`: the task's own image. polar reads an engine as working only
 * when `docker info` / `podman info` succeed (a client without a daemon, or podman that cannot run
 * containers, does not count).
 */
export type HarborEnvironment = 'host' | 'docker' | 'podman';
export const HARBOR_ENVIRONMENTS: readonly HarborEnvironment[] = ['host', 'docker', 'podman'];

/** The container engines that answer `info` here. */
export function workingEngines(run: (bin: string) => boolean = engineAnswers): ('docker' | 'podman')[] {
  return (['docker', 'podman'] as const).filter((e) => run(e));
}

function engineAnswers(bin: string): boolean {
  try {
    execFileSync(bin, ['info'], { stdio: 'ignore', timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

/**
 * The environment a run uses: the one asked for, or `host`. Asking for an engine that does not work
 * here is a usage error that says so.
 */
export function chooseEnvironment(asked: HarborEnvironment | undefined, engines: () => ('docker' | 'podman')[] = workingEngines): HarborEnvironment {
  if (asked === undefined || asked === 'host') return 'host';
  const found = engines();
  if (!found.includes(asked)) {
    throw new PolarError(
      'POLAR_USAGE',
      `--environment ${asked}: no working ${asked} here (\`${asked} info\` fails)${found.length > 0 ? `; working: ${found.join(', ')}` : ''}. Use --environment host: polar's sandbox gives the task's paths (/app, /tests, /logs) on this machine`,
    );
  }
  return asked;
}
