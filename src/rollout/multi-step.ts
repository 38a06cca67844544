import fs from 'node:fs/promises';
import path from 'node:path';
import { chooseReward } from './evaluators/harbor-rewards.js';
import type { Evaluation } from './evaluators/types.js';
import { boundedEvaluation, DEFAULT_REWARD_RANGE, type RewardRange } from './reward-range.js';
import type { RolloutTask } from './task-file.js';
import type { HarborStep, HarborTrial } from './harbor/types.js';

/**
 * Harbor's multi-step trial (trial/multi_step.py) as polar's stages run it: the steps in order in
 * one environment, each the agent with that step's instruction, then that step's verifier; the
 * steps' rewards make the sample's. Line numbers are Harbor's source at the fork snapshot
 * 15735640198/harbor f276a3b (notes: /work/notes/harbor-features.md).
 */

/** One verified step: its evaluation (the record says its metrics, or why it has none). */
export interface StepOutcome {
  name: string;
  evaluation: Evaluation;
}

/**
 * The task as one step runs it: the step's instruction as the prompt, its solution for the
 * oracle, its verifier's tests, timeout and env (the step's over the task's, multi_step.py:581-617,
 * verifier.py:150-199). `testsDir` is where the step's /tests were merged (mergeStepTests).
 */
export function stepTask(task: RolloutTask, step: HarborStep, testsDir: string): RolloutTask {
  const trial = task.harbor!;
  const harbor: HarborTrial = {
    ...trial,
    testsDir,
    solutionDir: step.solutionDir,
    verifierTimeoutSec: step.verifierTimeoutSec,
    verifierEnv: step.verifierEnv,
    // The step's artifacts are appended to the task's for its collection (config.py:683-688).
    artifacts: [...trial.artifacts, ...(step.artifacts ?? [])],
  };
  return { ...task, prompt: step.instruction, timeout: step.agentTimeoutSec, evaluator: { type: 'harbor', timeout: step.verifierTimeoutSec }, harbor };
}

/** The words a refusal of what polar does not implement yet says, so the verdict calls it unsupported (verdict.ts). */
export const NOT_IMPLEMENTED = 'not supported by polar yet';

/**
 * Why a multi-step task's samples cannot run as written (each step's `unsupported`, steps.ts):
 * refused before the first step rather than run otherwise; null when nothing is missing.
 */
export function stepsRefusal(trial: HarborTrial): string | null {
  const missing = (trial.steps ?? []).flatMap((s) => s.unsupported ?? []);
  if (missing.length === 0) return null;
  return `task ${trial.name}: ${missing.join('; ')}: ${NOT_IMPLEMENTED} in a multi-step task, so its steps are not run otherwise`;
}

/**
 * A step's /tests as Harbor uploads them (verifier.py:150-164): tests/, then steps/<name>/tests/
 * over it, so `bash /tests/test.sh` is the step's own test.sh where it has one, else the shared
 * one. Made in `scratch`; the caller removes it after the verifier. A step with no tests/ of its own
 * uses tests/ as it is.
 */
export async function mergeStepTests(trial: HarborTrial, step: HarborStep, scratch: string): Promise<{ dir: string; made: boolean }> {
  if (!step.testsDir) return { dir: trial.testsDir, made: false };
  await fs.mkdir(scratch, { recursive: true, mode: 0o700 });
  const dir = await fs.mkdtemp(path.join(scratch, `step-tests-${step.name}-`));
  await fs.chmod(dir, 0o755);
  const shared = await fs.stat(trial.testsDir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (shared) await fs.cp(trial.testsDir, dir, { recursive: true, verbatimSymlinks: true });
  await fs.cp(step.testsDir, dir, { recursive: true, force: true, verbatimSymlinks: true });
  return { dir, made: true };
}

/** The metrics a step's verifier reported; null when it has none (forfeited: timed out, killed, no reward file). */
export function stepRewards(e: Evaluation): Record<string, number> | null {
  const r = e.record.rewards;
  if (typeof e.record.forfeit === 'string' || r === null || typeof r !== 'object') return null;
  return r as Record<string, number>;
}

/**
 * Whether the steps after this one are not run (multi_step.py:180-210): a step without a verifier
 * result, or one whose metrics fall below its min_reward (a missing metric is -inf, :248-263).
 * Returns why, or null to go on.
 */
export function stopAfter(step: HarborStep, outcome: StepOutcome): string | null {
  const rewards = stepRewards(outcome.evaluation);
  if (rewards === null)
    return `step ${step.name} has no reward (${String(outcome.evaluation.record.forfeit ?? 'its verifier failed')}): the remaining steps are not run`;
  if (!step.minReward) return null;
  for (const [key, least] of Object.entries(step.minReward)) {
    const got = Object.hasOwn(rewards, key) ? rewards[key]! : Number.NEGATIVE_INFINITY;
    if (got < least) return `step ${step.name}: ${key} = ${got} is below its min_reward ${least}: the remaining steps are not run`;
  }
  return null;
}

/**
 * The sample's metrics from its steps' (multi_step.py:212-246): `final`, the last step run's;
 * `mean`, each metric's mean over the steps run, a metric a step lacks counting 0. One difference,
 * on purpose: Harbor leaves a step without a verifier result out of the mean; polar counts it as 0
 * for every metric, because the agent's code runs under the verifier and could cut it short (a
 * timeout, a killed checker) to drop a failed step from the mean.
 */
export function combineStepMetrics(strategy: 'mean' | 'final', outcomes: readonly StepOutcome[]): Record<string, number> {
  const all = outcomes.map((o) => stepRewards(o.evaluation) ?? {});
  if (all.length === 0) return {};
  if (strategy === 'final') return { ...all.at(-1)! };
  const keys = [...new Set(all.flatMap((r) => Object.keys(r)))];
  return Object.fromEntries(keys.map((k) => [k, all.reduce((sum, r) => sum + (Object.hasOwn(r, k) ? r[k]! : 0), 0) / all.length]));
}

/**
 * The sample's evaluation from its steps': the combined metrics, the scalar chosen as for one
 * verifier, every step's record kept. Each step's reward was bounded as it was scored (registry.ts);
 * the combination is bounded again in `range` (reward-range.ts), since the metric chosen from the
 * combined ones need not be the one each step's reward was (a step's other metrics are only finite).
 */
export function combinedEvaluation(
  trial: HarborTrial,
  outcomes: readonly StepOutcome[],
  rewardKey: string | null,
  stopped: string | null,
  range: RewardRange = DEFAULT_REWARD_RANGE,
): Evaluation {
  const strategy = trial.rewardStrategy ?? 'mean';
  const rewards = combineStepMetrics(strategy, outcomes);
  const record: Record<string, unknown> = {
    type: 'harbor',
    task: trial.name,
    multi_step_reward_strategy: strategy,
    steps: outcomes.map((o) => ({ name: o.name, reward: o.evaluation.reward, ...o.evaluation.record })),
    ...(stopped ? { stopped } : {}),
    // The last step's verifier output, where a reader (tasks check) looks first.
    ...(outcomes.at(-1)?.evaluation.record.output !== undefined ? { output: outcomes.at(-1)!.evaluation.record.output } : {}),
    rewards,
  };
  const chosen = chooseReward(rewards, rewardKey);
  if ('problem' in chosen)
    return boundedEvaluation({ reward: 0, traceRewards: null, record: { ...record, forfeit: `the steps' rewards: ${chosen.problem}` } }, range);
  return boundedEvaluation({ reward: chosen.reward, traceRewards: null, record: { ...record, reward_key: chosen.key } }, range);
}
