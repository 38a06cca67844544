import type { TaskEvaluator, RolloutTask } from '../task-file.js';
import type { Verification } from '../environments/types.js';
import type { PreparedWorkspace } from '../workspace.js';

/** The rewards a rollout takes, [LO, HI] (reward-range.ts: --reward-range, default [0, 1]). */
export type RewardRange = readonly [lo: number, hi: number];

/** What POSTRUN records for a sample's evaluation. */
export interface Evaluation {
  reward: number;
  traceRewards: number[] | null;
  /**
   * The evaluator's own account: type, commands and their exit codes, its output (bounded,
   * scrubbed), and `forfeit` (why the sample scored 0 without a verdict: its verifier was killed,
   * timed out, or left no reward).
   */
  record: Record<string, unknown>;
}

export interface EvaluationInput {
  task: RolloutTask;
  /** The agent's workspace as collected after it ended (the host folder). */
  workspace: PreparedWorkspace;
  diff: string;
  /** How the harness run ended. */
  sessionStatus: string;
  sessionId: string;
  /** The session's trace count (prefix-merging), for evaluators that give per-trace rewards. */
  traceCount: number;
  env: Record<string, string>;
  /** Where the evaluator's commands run (the sample's environment made it after the agent's processes died). */
  verification: Verification;
  /** Which of a Harbor verifier's metrics is the sample's reward (`--reward-key`; null: chooseReward's rule). */
  rewardKey: string | null;
  /** The rewards the rollout takes (`--reward-range`; absent: [0, 1]); registry.ts forfeits any other (reward-range.ts). */
  rewardRange?: RewardRange;
  /** A Harbor verifier's network: the task's where task.toml says, else none unless the rollout runs with --network host. */
  verifierNetwork: 'host' | 'none';
  /** The task file's folder (hidden checkers), shown read-only to evaluators only; null: none. */
  tasksDir: string | null;
  /** Where an evaluator may build a fresh copy of the workspace. */
  scratch: string;
  /** Values never to store (upstream keys, auth tokens). */
  secrets: readonly string[];
}

/** One kind of evaluator, keyed by the task file's `evaluator.type` (registry.ts picks it). */
export interface Evaluator<T extends TaskEvaluator['type'] = TaskEvaluator['type']> {
  readonly type: T;
  evaluate(input: EvaluationInput, spec: Extract<TaskEvaluator, { type: T }>): Promise<Evaluation>;
}
