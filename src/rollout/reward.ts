import { isRecord } from '../core/chat.js';

/** What a `command` evaluator's run says, or why it cannot be read as a reward. */
export type CommandReward = { reward: number; traceRewards: number[] | null; details: Record<string, unknown> | null } | { problem: string };

/**
 * A `command` evaluator's reward: its last non-empty stdout line when that is a JSON number, or a
 * JSON object `{"reward": x, "trace_rewards"?: [...], …}` (the rest kept as details); otherwise 1
 * for exit status 0 and 0 for any other. An object whose `reward` is not a finite number, or whose
 * `trace_rewards` is not a list of them, is a broken evaluator, not a score.
 */
export function commandReward(stdout: string, exitCode: number): CommandReward {
  const last = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .pop();
  let parsed: unknown;
  if (last !== undefined) {
    try {
      parsed = JSON.parse(last);
    } catch {
      parsed = undefined;
    }
  }
  if (typeof parsed === 'number') {
    return Number.isFinite(parsed)
      ? { reward: parsed, traceRewards: null, details: null }
      : { problem: `the evaluator printed a reward that is not finite: ${last}` };
  }
  if (isRecord(parsed) && 'reward' in parsed) {
    const { reward, trace_rewards: traces, ...details } = parsed;
    if (typeof reward !== 'number' || !Number.isFinite(reward))
      return { problem: `the evaluator's "reward" is not a finite number: ${JSON.stringify(reward)}` };
    if (traces !== undefined && (!Array.isArray(traces) || traces.some((r) => typeof r !== 'number' || !Number.isFinite(r)))) {
      return { problem: `the evaluator's "trace_rewards" is not a list of finite numbers: ${JSON.stringify(traces)}` };
    }
    return { reward, traceRewards: (traces as number[] | undefined) ?? null, details: Object.keys(details).length > 0 ? details : null };
  }
  return { reward: exitCode === 0 ? 1 : 0, traceRewards: null, details: null };
}
