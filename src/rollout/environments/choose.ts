import { PolarError } from '../../core/errors.js';
import { BOX_PROVIDERS, type BoxProviderName } from '../boxes/registry.js';
import type { EnvironmentName } from './names.js';

/**
 * Where a Harbor task's trial runs. `host`: polar's sandbox gives the container's paths (rollout/
 * harbor/trial.ts). A box provider (docker, podman): the task's own image. polar reads a provider
 * as working only when its probe passes (`docker info` / `podman info`: a client without a daemon,
 * or podman that cannot run containers, does not count).
 */

/** The box providers that work here, in the registry's order. */
export function workingEngines(probe: (name: BoxProviderName) => boolean = (n) => BOX_PROVIDERS[n].probe() === null): BoxProviderName[] {
  return (Object.keys(BOX_PROVIDERS) as BoxProviderName[]).filter((n) => probe(n));
}

/**
 * The environment a run uses: the one asked for; unasked, the first provider that works here (the
 * task's own image, as Harbor runs it), else `host`. Asking for one that does not work here is a
 * usage error that says so.
 */
export function chooseEnvironment(asked: EnvironmentName | undefined, engines: () => BoxProviderName[] = workingEngines): EnvironmentName {
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

/** The line a run prints when it chose a provider itself. */
export function environmentNotice(asked: EnvironmentName | undefined, chosen: EnvironmentName): string | null {
  if (asked !== undefined || chosen === 'host') return null;
  return `Harbor tasks run in their own images with ${chosen} (it works here); --environment host runs them in polar's sandbox on this machine instead`;
}
