// What the NeMo-RL stand-in (launcher.mjs) computes from one GRPO step's NeMo Gym `/run` answers,
// as NeMo-RL 7ea279a does: the advantages (src/train/nemo-rl/advantages.ts, which cites each step),
// the per-agent rollout metrics, and what it logs. NeMo-RL sends `advantages/*` and the per-agent
// metrics to its logger (TensorBoard in polar's config, grpo.py:3762 `prefix="train"`), not to
// stdout: the stand-in prints none of them either, writes them to a TensorBoard event file as
// NeMo-RL's logger does (launcher.mjs logMetrics; polar train reads them there) and appends every
// logged value to `<log_dir>/exp_001/logged_metrics.jsonl` for tests to read. Nothing is trained: the printed loss is
// 0 when no sample in the loss has a non-zero advantage (NeMo-RL's policy-gradient loss is then
// zero apart from its KL term, which starts at zero), else a stand-in value.
import path from 'node:path';

const repo = path.resolve(import.meta.dirname, '../../..');
const { batchAdvantages, gymResultSample } = await import(path.join(repo, 'dist/train/nemo-rl/advantages.js'));

/**
 * NeMo-RL's per-agent rollout metrics (rollouts.py:2719-2740): for each key of the agent's first
 * result, its numeric values over the batch, as `<agent>/<key>/{mean,max,min}` (metric_utils.py:24-45,
 * mean = sum / number of results).
 */
export function perAgentMetrics(rows, answers) {
  const byAgent = new Map();
  rows.forEach((row, i) => byAgent.set(row.agent_ref.name, [...(byAgent.get(row.agent_ref.name) ?? []), answers[i]]));
  const metrics = {};
  for (const [agent, results] of byAgent) {
    for (const key of Object.keys(results[0])) {
      const values = results
        .map((r) => r[key])
        .filter((v) => typeof v === 'number' || typeof v === 'boolean')
        .map(Number);
      if (values.length === 0) continue;
      metrics[`${agent}/${key}/mean`] = values.reduce((a, b) => a + b, 0) / results.length;
      metrics[`${agent}/${key}/max`] = Math.max(...values);
      metrics[`${agent}/${key}/min`] = Math.min(...values);
    }
  }
  return metrics;
}

/** The step's advantages from its answers, with the config keys NeMo-RL reads for them. */
export function stepAdvantages(answers, get) {
  // Each answer as NeMo-RL reads it (gymResultSample); the launcher has checked each has a trainable item.
  return batchAdvantages(answers.map(gymResultSample), {
    leaveOneOut: get('grpo.use_leave_one_out_baseline') ?? true,
    normalize: get('grpo.normalize_rewards') ?? true,
    clipLow: get('grpo.advantage_clip_low') ?? null,
    clipHigh: get('grpo.advantage_clip_high') ?? null,
    maskFlagged: get('env.should_mask_flagged_samples') !== false,
  });
}
