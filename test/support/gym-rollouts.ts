/**
 * How NeMo Gym reads a `rollouts.jsonl` back (Gym `c3bac96`), as a small consumer for tests: a
 * line must carry what rollout collection puts on every result — `_ng_task_index`,
 * `_ng_rollout_index` and `agent_ref` (nemo_gym/rollout_collection.py:812-814; key names
 * nemo_gym/global_config.py:136-137, :143) — since aggregation groups by `agent_ref.name`
 * (rollout_collection.py:859, :941), sorts by (task index, rollout index) (:897-898, :1149), keys
 * each rollout by that pair and raises on a second line with the same key
 * (nemo_gym/reward_profile.py:48-58), and computes per-task statistics grouped by task index
 * (reward_profile.py:243, :615-620) over each line's numeric `reward` (:141-142).
 */

type Json = Record<string, any>;

export interface GymTaskGroup {
  taskIndex: number;
  rewards: number[];
  lines: Json[];
}

/** Throws where Gym would; else the lines per agent and task, each task's lines in rollout order. */
export function aggregateLikeGym(lines: readonly Json[]): Map<string, GymTaskGroup[]> {
  for (const [i, line] of lines.entries()) {
    if (!Number.isInteger(line._ng_task_index) || !Number.isInteger(line._ng_rollout_index))
      throw new Error(`line ${i}: no _ng_task_index / _ng_rollout_index`);
    if (typeof line.agent_ref?.name !== 'string') throw new Error(`line ${i}: no agent_ref.name`);
    if (typeof line.reward !== 'number') throw new Error(`line ${i}: no numeric reward`);
  }
  const sorted = [...lines].sort((a, b) => a._ng_task_index - b._ng_task_index || a._ng_rollout_index - b._ng_rollout_index);
  const byAgent = new Map<string, Map<number, GymTaskGroup>>();
  const seen = new Set<string>();
  for (const line of sorted) {
    const key = `${line._ng_task_index},${line._ng_rollout_index}`;
    if (seen.has(key)) throw new Error(`Duplicate rollout row for rollout key (${key})`);
    seen.add(key);
    const tasks = byAgent.get(line.agent_ref.name) ?? new Map<number, GymTaskGroup>();
    byAgent.set(line.agent_ref.name, tasks);
    const group = tasks.get(line._ng_task_index) ?? { taskIndex: line._ng_task_index as number, rewards: [] as number[], lines: [] as Json[] };
    tasks.set(line._ng_task_index, group);
    group.rewards.push(line.reward);
    group.lines.push(line);
  }
  return new Map([...byAgent].map(([agent, tasks]) => [agent, [...tasks.values()]]));
}
