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
import { verifierNetwork } from '../../sandboxing.js';
import { StageError } from '../../stage-error.js';
import { taskImage } from './images.js';
import type { BoxSample, SampleServices } from './state.js';

/**
 * The task's environment/docker-compose.yaml read as Harbor reads it, over its base (the main
 * service is the agent's box): null without one. What polar cannot run is refused by name.
 */
export function composePlan(trial: HarborTrial, mainImage?: string, taskEnv = trial.environmentEnv): ComposePlan | null {
  const environmentDir = path.join(trial.dir, 'environment');
  const vars = harborComposeVars({
    environmentDir,
    ...(mainImage !== undefined ? { mainImage } : {}),
    ...(trial.cpus !== undefined ? { cpus: trial.cpus } : {}),
    ...(trial.memoryBytes !== undefined ? { memoryMb: Math.round(trial.memoryBytes / 1024 ** 2) } : {}),
    ...(taskEnv ? { taskEnv } : {}),
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
  // A step's verifier would join the sidecars as `main` while the agent's box, kept for the next
  // step, is still there under the same name.
  if (trial.steps && trial.steps.length > 0)
    throw new PolarError('POLAR_USAGE', 'docker-compose.yaml with [[steps]]: a multi-step task with compose services is not supported by polar yet');
  const shared = trial.verifierMode !== 'separate';
  if (shared && (trial.agentNetwork === 'public') !== (trial.verifierNetwork === 'public'))
    throw new PolarError(
      'POLAR_USAGE',
      "docker-compose.yaml: an agent and a shared verifier with different networks are not supported by polar yet (the verifier joins the agent's services and their network)",
    );
}

/**
 * The variables of the task's environment for every command in its box: [environment].env (Harbor
 * sets them for every command, environments/base.py:218-221; `${VAR}` from this machine, as
 * utils/env.py:97-127), then what the compose file sets on `main`.
 */
export function boxEnv(s: BoxSample): Record<string, string> {
  return { ...resolvedEnv(s), ...(s.plan?.main.env ?? {}) };
}

function resolvedEnv(s: BoxSample): Record<string, string> {
  try {
    return resolveEnv(s.trial.environmentEnv ?? {}, 'run');
  } catch (err) {
    throw new StageError('init', (err as Error).message, { cause: err });
  }
}

/**
 * Whether the services' network has the internet: a shared verifier joins it, so only when both the
 * agent and that verifier have it (a verifier kept offline is never given it through its sidecars;
 * a task whose two differ is `unsupported`, checking/as-written.ts). A separate verifier never joins.
 */
function servicesInternet(s: BoxSample): boolean {
  const agent = s.trial.agentNetwork === 'public' || s.spec.task.network === 'host';
  return agent && (s.separate !== undefined || verifierNetwork(s.deps.sandbox, s.spec.task) === 'host');
}

/**
 * Before any sample's budget: the sidecars' images, built once per content under build_timeout_sec
 * (the names and sources startServices asks for, so its own call finds them built).
 */
export async function provisionServices(s: BoxSample): Promise<void> {
  const plan = composePlan(s.trial, await taskImage(s));
  const timeoutSec = s.trial.buildTimeoutSec ?? DEFAULT_BUILD_TIMEOUT_SEC;
  for (const svc of plan?.services ?? [])
    if (svc.image.kind === 'build') await s.provider.image({ ...svc.image, name: `${s.trial.name}-${svc.name}`, timeoutSec }, s.deps.onNotice);
}

/** The healthcheck the agent's box waits for: task.toml's, else the compose file's for `main`. */
export function mainHealthcheck(s: BoxSample): Healthcheck | undefined {
  return s.trial.healthcheck ?? s.plan?.main.healthcheck ?? undefined;
}

/** A compose task's services besides `main`, started and healthy as its depends_on asks; null without compose. */
export async function startTaskServices(s: BoxSample): Promise<SampleServices | null> {
  const { trial, spec, deps } = s;
  // Interpolated with [environment].env as resolved on this machine (`${VAR}`), as every command gets it.
  const plan = composePlan(trial, await taskImage(s), resolvedEnv(s));
  s.plan = plan;
  if (!plan) return null;
  const running = await startServices(s.provider, plan, {
    id: spec.sampleId,
    taskName: trial.name,
    internet: servicesInternet(s),
    // Harbor caps `main` alone (cpus, memory_mb); a sidecar gets polar's own caps only.
    limits: deps.sandbox.limits,
    cpus: null,
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
