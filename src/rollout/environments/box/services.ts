import path from 'node:path';
import { PolarError } from '../../../core/errors.js';
import { harborComposeVars } from '../../boxes/compose/interpolate.js';
import { loadCompose } from '../../boxes/compose/parse.js';
import type { ComposePlan } from '../../boxes/compose/plan.js';
import { startServices } from '../../boxes/compose/run.js';
import type { BoxNetwork, Healthcheck } from '../../boxes/types.js';
import { resolveEnv } from '../../harbor/env.js';
import { DEFAULT_BUILD_TIMEOUT_SEC } from '../../harbor/toml-fields.js';
import type { HarborTrial } from '../../harbor/types.js';
import { StageError } from '../../stage-error.js';
import { taskImage } from './images.js';
import { withTaskMemory } from './open.js';
import type { BoxSample, SampleServices } from './state.js';

/**
 * The task's environment/docker-compose.yaml read as Harbor reads it, over its base (the main
 * service is the agent's box): null without one. What polar cannot run is refused by name.
 */
export function composePlan(trial: HarborTrial, mainImage?: string): ComposePlan | null {
  const environmentDir = path.join(trial.dir, 'environment');
  const vars = harborComposeVars({
    environmentDir,
    ...(mainImage !== undefined ? { mainImage } : {}),
    ...(trial.cpus !== undefined ? { cpus: trial.cpus } : {}),
    ...(trial.memoryBytes !== undefined ? { memoryMb: Math.round(trial.memoryBytes / 1024 ** 2) } : {}),
    ...(trial.environmentEnv ? { taskEnv: trial.environmentEnv } : {}),
  });
  const plan = loadCompose({ environmentDir, vars });
  if (plan) mainOverridesProblem(plan, trial);
  return plan;
}

/**
 * What the file sets on `main` that polar applies: its variables, its healthcheck, its aliases and
 * what it waits for. The rest is refused by name: polar's keep-alive is main's command (Harbor's own,
 * docker-compose-build.yaml:6), and its workdir and user are task.toml's.
 */
function mainOverridesProblem(plan: ComposePlan, trial: HarborTrial): void {
  const m = plan.main;
  const refuse = (key: string, why: string) => {
    throw new PolarError('POLAR_USAGE', `docker-compose.yaml: service main: \`${key}\` is not supported by polar yet (${why})`);
  };
  if (m.command) refuse('command', "the agent's box runs Harbor's keep-alive");
  if (m.entrypoint) refuse('entrypoint', "the agent's box keeps its image's ENTRYPOINT, as Harbor's base does");
  if (m.workingDir !== undefined) refuse('working_dir', 'give [environment].workdir in task.toml');
  if (m.user !== undefined) refuse('user', 'give [agent].user in task.toml');
  if (m.healthcheck && trial.healthcheck) refuse('healthcheck', 'task.toml has [environment.healthcheck] too: keep one');
}

/**
 * The variables of the task's environment for every command in its box: [environment].env (Harbor
 * sets them for every command, environments/base.py:218-221; `${VAR}` from this machine, as
 * utils/env.py:97-127), then what the compose file sets on `main`.
 */
export function boxEnv(s: BoxSample): Record<string, string> {
  let own: Record<string, string> = {};
  try {
    own = resolveEnv(s.trial.environmentEnv ?? {}, 'run');
  } catch (err) {
    throw new StageError('init', (err as Error).message, { cause: err });
  }
  return { ...own, ...(s.plan?.main.env ?? {}) };
}

/** The healthcheck the agent's box waits for: task.toml's, else the compose file's for `main`. */
export function mainHealthcheck(s: BoxSample): Healthcheck | undefined {
  return s.trial.healthcheck ?? s.plan?.main.healthcheck ?? undefined;
}

/** A compose task's services besides `main`, started and healthy as its depends_on asks; null without compose. */
export async function startTaskServices(s: BoxSample): Promise<SampleServices | null> {
  const { trial, spec, deps } = s;
  const plan = composePlan(trial, await taskImage(s));
  s.plan = plan;
  if (!plan) return null;
  const running = await startServices(s.provider, plan, {
    id: spec.sampleId,
    taskName: trial.name,
    internet: trial.agentNetwork === 'public' || spec.task.network === 'host',
    limits: withTaskMemory(deps.sandbox.limits, trial.memoryBytes),
    cpus: trial.cpus ?? null,
    buildTimeoutSec: trial.buildTimeoutSec ?? DEFAULT_BUILD_TIMEOUT_SEC,
    onNotice: deps.onNotice,
  }).catch((err: Error) => {
    throw err instanceof StageError ? err : new StageError('init', err.message, { cause: err });
  });
  return { network: running.network, mainNetwork: running.mainNetwork, box: (name) => running.boxes.get(name), remove: running.remove };
}

/**
 * The network of a box with no compose services: with the internet, a network of its own where the
 * provider can make one (the engine's default network holds every sample there, so one agent reached
 * its siblings by address); else none (only lo).
 */
export async function boxNetwork(s: BoxSample, id: string, internet: boolean): Promise<BoxNetwork> {
  if (!internet) return { kind: 'none' };
  const networks = s.provider.networks;
  if (!networks) return { kind: 'internet' };
  let name = s.networks.get(id);
  if (!name) {
    name = await networks.create(id, false);
    s.networks.set(id, name);
  }
  return { kind: 'attach', network: name, aliases: [] };
}
