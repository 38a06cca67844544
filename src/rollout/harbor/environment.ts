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
 * The environment a run uses: the one asked for; unasked, the first engine that works here (the
 * task's own image, as Harbor runs it), else `host`. Asking for an engine that does not work here is
 * a usage error that says so.
 */
export function chooseEnvironment(asked: HarborEnvironment | undefined, engines: () => ('docker' | 'podman')[] = workingEngines): HarborEnvironment {
  if (asked === 'host') return 'host';
  const found = engines();
  if (asked === undefined) return found[0] ?? 'host';
  if (!found.includes(asked)) {
    throw new PolarError(
      'POLAR_USAGE',
      `--environment ${asked}: no working ${asked} here (\`${asked} info\` fails)${found.length > 0 ? `; working: ${found.join(', ')}` : ''}. Use --environment host: polar's sandbox gives the task's paths (/app, /tests, /logs) on this machine`,
    );
  }
  return asked;
}

/** The line a run prints when it chose an engine itself. */
export function environmentNotice(asked: HarborEnvironment | undefined, chosen: HarborEnvironment): string | null {
  if (asked !== undefined || chosen === 'host') return null;
  return `Harbor tasks run in their own images with ${chosen} (it works here); --environment host runs them in polar's sandbox on this machine instead`;
}
