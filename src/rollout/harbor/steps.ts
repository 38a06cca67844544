import fs from 'node:fs';
import path from 'node:path';
import { isRecord } from '../../core/chat.js';
import { readHealthcheck } from './features.js';
import { seconds, stringMap, type Report } from './toml-fields.js';
import type { HarborStep, HarborTrial } from './types.js';
import { isDir, isFile } from '../../core/fs-kind.js';

/**
 * A multi-step task's [[steps]] (models/task/config.py:662-722) and their folders
 * (models/task/paths.py:140-189), checked as Harbor does at load (models/task/task.py:143-170:
 * each step's folder and instruction.md; a test.sh of its own or the shared tests/test.sh). Line
 * numbers are Harbor's source at the fork snapshot 15735640198/harbor f276a3b.
 *
 * What polar does not run in a step yet is refused by name, so the task is reported, not run
 * differently: a step's artifacts, users, network and verifier environment, and a separate
 * verifier for the whole task.
 */

const STEP_KEYS = new Set(['name', 'agent', 'verifier', 'min_reward', 'healthcheck']);
const STEP_AGENT_KEYS = new Set(['timeout_sec']);
const STEP_VERIFIER_KEYS = new Set(['timeout_sec', 'env']);
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export interface StepDefaults {
  agentTimeoutSec: number | null;
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
  solutionDir: string | null;
  verifierMode: HarborTrial['verifierMode'];
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
  if (defaults.verifierMode === 'separate')
    at('task.toml', 'verifier.environment_mode', 'a multi-step task with a separate verifier environment is not supported by polar yet');
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
  const unsupported = (key: string, what: string) => at('task.toml', `${field}.${key}`, `${what} is not supported by polar yet in a step`);
  for (const key of Object.keys(raw)) if (!STEP_KEYS.has(key)) unsupported(key, key);
  const agent = isRecord(raw.agent) ? raw.agent : {};
  const verifier = isRecord(raw.verifier) ? raw.verifier : {};
  for (const key of Object.keys(agent)) if (!STEP_AGENT_KEYS.has(key)) unsupported(`agent.${key}`, `agent.${key}`);
  for (const key of Object.keys(verifier)) if (!STEP_VERIFIER_KEYS.has(key)) unsupported(`verifier.${key}`, `verifier.${key}`);
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
  };
}

/** min_reward: a number gates `reward`; a table gates each of its keys (config.py:666-674). */
function readMinReward(v: unknown, field: string, at: Report): Record<string, number> | null {
  if (v === undefined) return null;
  if (typeof v === 'number' && Number.isFinite(v)) return { reward: v };
  if (isRecord(v) && Object.values(v).every((x) => typeof x === 'number' && Number.isFinite(x))) return v as Record<string, number>;
  at('task.toml', field, 'a number (the least `reward`) or a table of them by metric');
  return null;
}
