import fs from 'node:fs';
import path from 'node:path';
import { isRecord } from '../../core/chat.js';
import { readHealthcheck } from './features.js';
import { ignoreUnknown, network, seconds, stageUser, stringMap, type Report } from './toml-fields.js';
import type { HarborStep, HarborTrial } from './types.js';
import { readArtifacts, readCollect } from './verifier-config.js';
import { isDir, isFile } from '../../core/fs-kind.js';

/**
 * A multi-step task's [[steps]] (models/task/config.py:662-722) and their folders
 * (models/task/paths.py:140-189), checked as Harbor does at load (models/task/task.py:143-170:
 * each step's folder and instruction.md; a test.sh of its own or the shared tests/test.sh). Line
 * numbers are Harbor's source at the fork snapshot 15735640198/harbor f276a3b.
 *
 * Keys StepConfig does not define are ignored, as pydantic ignores them (StepConfig sets no
 * `extra`, config.py:662-689): public tasks carry `dependencies` and `inherit_prior_session`. What
 * polar does not run in a step yet (a verifier environment of its own, a separate verifier for the
 * whole task, its own users, network or collect hooks) loads, named in the step's `unsupported`:
 * its samples refuse it (step-stages.ts) and `polar tasks check` calls it unsupported.
 */

/** StepConfig's fields (config.py:662-689), AgentConfig's (:242-248) and VerifierConfig's (:464-500), with the network policy's (:126-151). */
const STEP_KEYS = new Set(['name', 'agent', 'verifier', 'min_reward', 'healthcheck', 'artifacts']);
const STEP_AGENT_KEYS = new Set(['timeout_sec', 'user', 'network_mode', 'allowed_hosts']);
const STEP_VERIFIER_KEYS = new Set(['timeout_sec', 'env', 'user', 'environment_mode', 'environment', 'collect', 'network_mode', 'allowed_hosts']);
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export interface StepDefaults {
  agentTimeoutSec: number | null;
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
  solutionDir: string | null;
  verifierMode: HarborTrial['verifierMode'];
  agentUser?: string | undefined;
  verifierUser?: string | undefined;
}

/** Whether task.toml declares a non-empty [[steps]] (paths.py:191-197): a multi-step task. */
export function hasSteps(config: Record<string, unknown> | null): boolean {
  return Array.isArray(config?.steps) && config.steps.length > 0;
}

/** The steps, each field and folder checked (every problem reported); undefined for a single-step task. */
export function readSteps(
  config: Record<string, unknown>,
  dir: string,
  defaults: StepDefaults,
  at: Report,
  stripCanary: (text: string) => string,
): Pick<HarborTrial, 'steps' | 'rewardStrategy'> {
  const strategy = config.multi_step_reward_strategy;
  if (strategy !== undefined && strategy !== 'mean' && strategy !== 'final') at('task.toml', 'multi_step_reward_strategy', '"mean" or "final"');
  if (config.steps === undefined) return {};
  if (!Array.isArray(config.steps) || config.steps.length === 0) {
    at('task.toml', 'steps', 'an array of tables ([[steps]]), each with a name');
    return {};
  }
  const steps: HarborStep[] = [];
  const seen = new Set<string>();
  config.steps.forEach((raw, i) => {
    const field = `steps[${i}]`;
    if (!isRecord(raw)) {
      at('task.toml', field, 'a table with a name');
      return;
    }
    const step = readStep(raw, field, dir, defaults, at, stripCanary);
    if (!step) return;
    if (seen.has(step.name)) at('task.toml', `${field}.name`, `${step.name} names an earlier step too`);
    seen.add(step.name);
    steps.push(step);
  });
  return { steps, rewardStrategy: strategy === 'final' ? 'final' : 'mean' };
}

function readStep(
  raw: Record<string, unknown>,
  field: string,
  dir: string,
  defaults: StepDefaults,
  at: Report,
  stripCanary: (text: string) => string,
): HarborStep | null {
  ignoreUnknown(raw, STEP_KEYS, field, 'StepConfig', at);
  const agent = table(raw.agent, `${field}.agent`, at);
  const verifier = table(raw.verifier, `${field}.verifier`, at);
  ignoreUnknown(agent, STEP_AGENT_KEYS, `${field}.agent`, 'AgentConfig', at);
  ignoreUnknown(verifier, STEP_VERIFIER_KEYS, `${field}.verifier`, 'VerifierConfig', at);
  if (typeof raw.name !== 'string' || !NAME.test(raw.name)) {
    at('task.toml', `${field}.name`, "the step's folder under steps/: letters, digits, . _ -");
    return null;
  }
  const name = raw.name;
  const stepDir = path.join(dir, 'steps', name);
  const rel = (p: string) => path.posix.join('steps', name, p);
  if (!isDir(stepDir)) {
    at(rel(''), null, `missing: step ${name}'s folder (instruction.md, tests/)`);
    return null;
  }
  let instruction = '';
  try {
    instruction = stripCanary(fs.readFileSync(path.join(stepDir, 'instruction.md'), 'utf8'));
    if (instruction.trim() === '') at(rel('instruction.md'), null, 'empty');
  } catch {
    at(rel('instruction.md'), null, `missing: what the agent is told in step ${name}`);
  }
  const ownTests = isDir(path.join(stepDir, 'tests')) ? path.join(stepDir, 'tests') : null;
  if (!isFile(path.join(stepDir, 'tests', 'test.sh')) && !isFile(path.join(dir, 'tests', 'test.sh')))
    at(rel('tests/test.sh'), null, `missing, and no shared tests/test.sh: step ${name}'s verifier`);
  const workdirDir = isDir(path.join(stepDir, 'workdir')) ? path.join(stepDir, 'workdir') : null;
  const healthcheck = readHealthcheck(raw.healthcheck, `${field}.healthcheck`, at);
  const ownSolution = isDir(path.join(stepDir, 'solution')) ? path.join(stepDir, 'solution') : null;
  return {
    name,
    instruction,
    testsDir: ownTests,
    solutionDir: ownSolution ?? defaults.solutionDir,
    agentTimeoutSec: seconds(agent.timeout_sec, `${field}.agent.timeout_sec`, at) ?? defaults.agentTimeoutSec,
    verifierTimeoutSec: seconds(verifier.timeout_sec, `${field}.verifier.timeout_sec`, at) ?? defaults.verifierTimeoutSec,
    verifierEnv: { ...defaults.verifierEnv, ...stringMap(verifier.env, `${field}.verifier.env`, at) },
    minReward: readMinReward(raw.min_reward, `${field}.min_reward`, at),
    workdirDir,
    ...(healthcheck ? { healthcheck } : {}),
    artifacts: readArtifacts(raw.artifacts, at, `${field}.artifacts`),
    unsupported: stepUnsupported(name, agent, verifier, field, defaults, at),
  };
}

function table(v: unknown, field: string, at: Report): Record<string, unknown> {
  if (v === undefined) return {};
  if (isRecord(v)) return v;
  at('task.toml', field, 'a table');
  return {};
}

/**
 * What the step sets that polar does not run per step yet, each named (read and checked as
 * Harbor's models do). A separate verifier anywhere in a multi-step task: the step's own
 * (resolve_step_verifier_mode, verifier_mode.py:29-40), or the task's, which every step inherits.
 */
function stepUnsupported(
  name: string,
  agent: Record<string, unknown>,
  verifier: Record<string, unknown>,
  field: string,
  defaults: StepDefaults,
  at: Report,
): string[] {
  const out: string[] = [];
  const stepMode = verifier.environment_mode ?? (verifier.environment !== undefined ? 'separate' : undefined);
  if (stepMode !== undefined && stepMode !== 'shared' && stepMode !== 'separate')
    at('task.toml', `${field}.verifier.environment_mode`, '"shared" or "separate"');
  if (stepMode === 'shared' && verifier.environment !== undefined)
    at('task.toml', `${field}.verifier.environment`, 'conflicts with environment_mode = "shared": Harbor\'s own validator rejects it too (config.py:502-516)');
  if ((stepMode ?? defaults.verifierMode) === 'separate')
    out.push(
      `step ${name}'s separate verifier environment (${stepMode ? `[steps.verifier] of step ${name}` : "the task's [verifier]"}: environment_mode = "separate")`,
    );
  const agentUser = stageUser(agent.user, `${field}.agent.user`, at);
  if (agentUser !== undefined && agentUser !== defaults.agentUser)
    out.push(`step ${name}'s own agent user (${field}.agent.user = ${JSON.stringify(agentUser)})`);
  const verifierUser = stageUser(verifier.user, `${field}.verifier.user`, at);
  if (verifierUser !== undefined && verifierUser !== defaults.verifierUser)
    out.push(`step ${name}'s own verifier user (${field}.verifier.user = ${JSON.stringify(verifierUser)})`);
  for (const [phase, t] of [['agent', agent] as const, ['verifier', verifier] as const])
    if (network(t, `${field}.${phase}`, at, true) !== null) out.push(`step ${name}'s own ${phase} network (${field}.${phase}.network_mode)`);
  if (readCollect(verifier.collect, at, `${field}.verifier.collect`).length > 0) out.push(`step ${name}'s [[steps.verifier.collect]] hooks`);
  return out;
}

/** min_reward: a number gates `reward`; a table gates each of its keys (config.py:666-674). */
function readMinReward(v: unknown, field: string, at: Report): Record<string, number> | null {
  if (v === undefined) return null;
  if (typeof v === 'number' && Number.isFinite(v)) return { reward: v };
  if (isRecord(v) && Object.values(v).every((x) => typeof x === 'number' && Number.isFinite(x))) return v as Record<string, number>;
  at('task.toml', field, 'a number (the least `reward`) or a table of them by metric');
  return null;
}
