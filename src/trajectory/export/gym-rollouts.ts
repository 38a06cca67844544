import type { RequestRecord } from '../../store/requests.js';
import type { ResponseLookup } from '../conversation.js';
import type { Trajectory } from '../types.js';
import { AGENT_NAME, nemoGymResult, type NemoGymResult } from './nemo-gym.js';

/**
 * A line of NeMo Gym's `rollouts.jsonl`, what `gym eval run` / rollout collection writes for one
 * rollout (Gym `c3bac96`): the agent's `/run` result (nemo-gym.ts) plus the three keys collection
 * copies from the row onto it (nemo_gym/rollout_collection.py:812-814): `_ng_task_index`,
 * `_ng_rollout_index` (global_config.py:136-137) and `agent_ref` (:143). Gym reads them back to
 * group and count: per agent by `agent_ref.name` (rollout_collection.py:859, :941), sorted by
 * (task index, rollout index) (:897-898, :1149), one rollout per (task, rollout) key (a second row
 * with the same key is an error: reward_profile.py:53-58), and per-task statistics grouped by task
 * index (reward_profile.py:243, :615-620). So one polar sample is one line with its own key, and a
 * GRPO group (a rollout's task) is one task index. `task_id` sits at the top level, where polar's
 * own Gym rows name their task (train/gym-agent/task.ts), with the group id beside it; both are null for
 * a session that was not a rollout sample (it is its own task index).
 */
export interface GymRolloutRow extends NemoGymResult {
  agent_ref: { type: 'responses_api_agents'; name: string };
  _ng_task_index: number;
  _ng_rollout_index: number;
  task_id: string | null;
  group_id: string | null;
  polar: NemoGymResult['polar'] & { rollout_id: string | null; task_id: string | null; group_id: string | null; sample_index: number | null };
}

/**
 * Hands out Gym's indices: one task index per GRPO group (a rollout's task; a session outside a
 * rollout is a group of its own), in the order groups first appear, and within it rollout indices
 * 0, 1, 2 … in the order its samples are written, so no two lines share a key.
 */
export class GymIndices {
  private readonly tasks = new Map<string, number>();
  private readonly rollouts = new Map<number, number>();

  next(trace: Pick<Trajectory, 'group_id' | 'session_id'>): { task: number; rollout: number } {
    const key = trace.group_id !== null ? `group:${trace.group_id}` : `session:${trace.session_id}`;
    let task = this.tasks.get(key);
    if (task === undefined) {
      task = this.tasks.size;
      this.tasks.set(key, task);
    }
    const rollout = this.rollouts.get(task) ?? 0;
    this.rollouts.set(task, rollout + 1);
    return { task, rollout };
  }
}

/** The main agent of a session's traces: `main` when it has one, else the agent of its first trace. */
export function mainAgentOf(traces: readonly Pick<Trajectory, 'agent_id'>[]): string | null {
  if (traces.some((t) => t.agent_id === 'main')) return 'main';
  return traces[0]?.agent_id ?? null;
}

/** One sample's main trace as a Gym rollouts.jsonl line (indices taken from `indices` only on success). */
export function gymRolloutRow(
  trace: Trajectory,
  calls: readonly RequestRecord[],
  indices: GymIndices,
  /** agentName: the Gym agent instance (default polar's own, the one `polar train grpo` starts). */
  extra: { sampleIndex: number | null; agentName?: string; lookup?: ResponseLookup },
): GymRolloutRow | { problem: string } {
  if (trace.response_logprobs === null) return { problem: 'a call has no logprobs (a Gym row needs one per generated token)' };
  const result = nemoGymResult(trace, calls, extra.lookup);
  if ('problem' in result) return result;
  const { task, rollout } = indices.next(trace);
  return {
    ...result,
    agent_ref: { type: 'responses_api_agents', name: extra.agentName ?? AGENT_NAME },
    _ng_task_index: task,
    _ng_rollout_index: rollout,
    task_id: trace.task_id,
    group_id: trace.group_id,
    polar: { ...result.polar, rollout_id: trace.rollout_id, task_id: trace.task_id, group_id: trace.group_id, sample_index: extra.sampleIndex },
  };
}
