import { BOX_PROVIDERS } from '../boxes/registry.js';
import type { BoxProvider } from '../boxes/types.js';
import { lookingUpInterpreters } from './interpreter.js';
import { boxEnvironment } from './box/index.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import type { EnvironmentName } from './names.js';
import { hostEnvironment } from './host.js';
import type { SampleEnvironment } from './types.js';

type EnvironmentFactory = (deps: EnvironmentDeps, spec: SampleSpec) => SampleEnvironment;

/**
 * Every environment by its `--environment` name: the host, and one per box provider (boxes/
 * registry.ts), so a new engine is one provider file and one line there.
 */
const ENVIRONMENTS = {
  // A verifier's "command not found" is looked into (evaluators/interpreter.ts): on the host it may
  // be this machine's missing toolchain, never the agent's to be scored for.
  host: (deps: EnvironmentDeps, spec: SampleSpec) => lookingUpInterpreters(hostEnvironment(deps, spec), deps.scratch),
  ...(Object.fromEntries(Object.entries(BOX_PROVIDERS).map(([name, p]) => [name, boxEnvironment(p as BoxProvider)])) as Record<
    keyof typeof BOX_PROVIDERS,
    EnvironmentFactory
  >),
} satisfies Record<EnvironmentName, EnvironmentFactory>;

/**
 * The environment a sample of `task` runs in: the rollout's `--environment` for a Harbor task (its
 * image is what a box runs), the host for a JSONL task (no image to run).
 */
export function openEnvironment(name: EnvironmentName | undefined, deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment {
  const chosen = spec.task.harbor ? (name ?? 'host') : 'host';
  return ENVIRONMENTS[chosen](deps, spec);
}
