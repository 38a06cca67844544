import { lookingUpInterpreters } from '../evaluators/interpreter.js';
import { containerEnvironment } from './container.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import { hostEnvironment } from './host.js';
import type { SampleEnvironment } from './types.js';

type EnvironmentFactory = (deps: EnvironmentDeps, spec: SampleSpec) => SampleEnvironment;

/** Every environment by its `--environment` name: a new one (a remote sandbox, Kubernetes) is one file and one line. */
const ENVIRONMENTS: Record<'host' | 'docker' | 'podman', EnvironmentFactory> = {
  // A verifier's "command not found" is looked into (evaluators/interpreter.ts): on the host it may
  // be this machine's missing toolchain, never the agent's to be scored for.
  host: (deps, spec) => lookingUpInterpreters(hostEnvironment(deps, spec), deps.scratch),
  docker: containerEnvironment('docker'),
  podman: containerEnvironment('podman'),
};

/**
 * The environment a sample of `task` runs in: the rollout's `--environment` for a Harbor task (its
 * image is what a container runs), the host for a JSONL task (no image to run).
 */
export function openEnvironment(name: 'host' | 'docker' | 'podman' | undefined, deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment {
  const chosen = spec.task.harbor ? (name ?? 'host') : 'host';
  return ENVIRONMENTS[chosen](deps, spec);
}
