import type { Yaml } from '../yaml.js';
import { BASE_PLACEHOLDER } from './contract.js';

/**
 * How NeMo-RL splits a GRPO step's batch over the GPUs, and the asserts that stop a run whose
 * sizes do not split (read at NeMo-RL 7ea279a; each is in fixtures/nemo-rl/contract.json's asserts
 * with `checked_by` this file). Judged on polar's config merged onto the checkout's base config, so
 * --set and --config count; a value the merged config cannot say (the key list's placeholder, an
 * interpolation it cannot resolve) is not judged. DTensor policy only (polar's path; Megatron has
 * its own sizes).
 *
 * - world size = cluster.gpus_per_node × num_nodes (`--gpus` writes gpus_per_node); it must be a
 *   multiple of the policy's TP × CP (lm_policy.py:225, :233; PP is 1 under DTensor, :114) and of
 *   vLLM's TP × PP (vllm_generation.py:121). Data-parallel size DP = world / (TP × CP).
 * - train: the step batch (num_prompts_per_step × num_generations_per_prompt) is cut into
 *   optimizer batches of policy.train_global_batch_size (lm_policy.py:779, batched_data_dict.py:537),
 *   each split evenly over DP (batched_data_dict.py:541).
 * - logprobs: the whole step batch split evenly over DP (lm_policy.py:460-497, batch_size None;
 *   batched_data_dict.py:541). Async GRPO asserts the same (grpo.py:4669).
 * - with neither policy.sequence_packing nor policy.dynamic_batching on (automodel/data.py:227-245;
 *   grpo_math_1B.yaml has sequence packing on), each rank's share must be whole micro-batches
 *   (batched_data_dict.py:1011): train_global_batch_size / DP of policy.train_micro_batch_size
 *   (dtensor_policy_worker_v2.py:414-417, :496-499), step batch / DP of policy.logprob_batch_size
 *   (:606-610, :632-635).
 */
export interface BatchSizes {
  world: number;
  /** Policy TP × CP (DTensor). */
  modelParallel: number;
  /** vLLM TP × PP. */
  generationParallel: number | null;
  stepBatch: number;
  globalBatch: number;
  /** Micro-batches apply (sequence packing and dynamic batching both off); null when unknown. */
  microBatches: boolean | null;
  trainMicroBatch: number | null;
  logprobBatch: number | null;
}

/** The sizes the merged config says, or null when it cannot say the ones every rule needs. */
export function batchSizes(merged: Yaml): BatchSizes | null {
  // Megatron has its own parallel sizes; a non-colocated vLLM takes GPUs from the policy's cluster.
  if (valueAt(merged, 'policy.megatron_cfg.enabled') === true || valueAt(merged, 'policy.generation.colocated.enabled') === false) return null;
  const num = (key: string) => {
    const v = valueAt(merged, key);
    return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null;
  };
  const gpus = num('cluster.gpus_per_node');
  const prompts = num('grpo.num_prompts_per_step');
  const group = num('grpo.num_generations_per_prompt');
  const globalBatch = num('policy.train_global_batch_size');
  const tp = num('policy.dtensor_cfg.tensor_parallel_size');
  const cp = num('policy.dtensor_cfg.context_parallel_size');
  if (gpus === null || prompts === null || group === null || globalBatch === null || tp === null || cp === null) return null;
  const vtp = num('policy.generation.vllm_cfg.tensor_parallel_size');
  const vpp = num('policy.generation.vllm_cfg.pipeline_parallel_size');
  const packing = valueAt(merged, 'policy.sequence_packing.enabled');
  const dynamic = valueAt(merged, 'policy.dynamic_batching.enabled');
  return {
    world: gpus * (num('cluster.num_nodes') ?? 1),
    modelParallel: tp * cp,
    generationParallel: vtp !== null && vpp !== null ? vtp * vpp : null,
    stepBatch: prompts * group,
    globalBatch,
    microBatches: typeof packing === 'boolean' && typeof dynamic === 'boolean' ? !packing && !dynamic : null,
    trainMicroBatch: num('policy.train_micro_batch_size'),
    logprobBatch: num('policy.logprob_batch_size'),
  };
}

/** What NeMo-RL would fail on for these sizes, each `file:line: what is wrong — what to change`. */
export function splitProblems(s: BatchSizes): string[] {
  const out: string[] = [];
  const gpus = `the GPU count ${s.world} (--gpus; cluster.gpus_per_node × num_nodes)`;
  if (s.world % s.modelParallel !== 0) {
    out.push(
      `nemo_rl/models/policy/lm_policy.py:${s.world < s.modelParallel ? 225 : 233}: ${gpus} is not a multiple of the policy's tensor_parallel_size × context_parallel_size = ${s.modelParallel}: pass a --gpus that is a multiple of ${s.modelParallel}, or lower policy.dtensor_cfg.tensor_parallel_size / context_parallel_size with --set`,
    );
    return out;
  }
  if (s.generationParallel !== null && s.world % s.generationParallel !== 0)
    out.push(
      `nemo_rl/models/generation/vllm/vllm_generation.py:121: ${gpus} is not a multiple of vLLM's tensor_parallel_size × pipeline_parallel_size = ${s.generationParallel}: pass a --gpus that is a multiple of ${s.generationParallel}, or lower policy.generation.vllm_cfg.tensor_parallel_size with --set`,
    );
  const dp = s.world / s.modelParallel;
  const ranks = dp === 1 ? 'the 1 data-parallel GPU' : `the ${dp} data-parallel GPUs`;
  const step = `prompts × group size = ${s.stepBatch}`;
  const fitting = (ok: (dp: number) => boolean) => {
    const counts = [];
    for (let n = 1; n <= Math.max(s.world, 8); n++) if (ok(n)) counts.push(n * s.modelParallel);
    return counts.length > 0 ? `, or --gpus ${counts.slice(0, 6).join(' / ')}` : '';
  };
  if (s.stepBatch % s.globalBatch !== 0)
    out.push(
      `nemo_rl/distributed/batched_data_dict.py:537: the step's batch (${step}) is not a multiple of policy.train_global_batch_size ${s.globalBatch}: leave train_global_batch_size to polar (prompts × group size) or --set it to a divisor of ${s.stepBatch}`,
    );
  const even = (n: number) => s.globalBatch % n === 0 && s.stepBatch % n === 0;
  if (!even(dp)) {
    out.push(
      `nemo_rl/distributed/batched_data_dict.py:541: NeMo-RL splits each step's batch (${step}${s.globalBatch === s.stepBatch ? '' : `, in optimizer batches of policy.train_global_batch_size ${s.globalBatch}`}) evenly over ${ranks}, and ${s.globalBatch % dp !== 0 ? s.globalBatch : s.stepBatch} does not divide by ${dp}: make --prompts-per-step × --group-size a multiple of ${dp}${fitting(even)}`,
    );
    return out;
  }
  if (s.microBatches !== true) return out;
  const rules: [string, number | null, number, string][] = [
    ['policy.train_micro_batch_size', s.trainMicroBatch, s.globalBatch / dp, 'dtensor_policy_worker_v2.py:414-417, train'],
    ['policy.logprob_batch_size', s.logprobBatch, s.stepBatch / dp, 'dtensor_policy_worker_v2.py:606-610, logprobs'],
  ];
  for (const [key, micro, share, where] of rules) {
    if (micro === null || share % micro === 0) continue;
    const whole = (n: number) => even(n) && (s.globalBatch / n) % (s.trainMicroBatch ?? 1) === 0 && (s.stepBatch / n) % (s.logprobBatch ?? 1) === 0;
    out.push(
      `nemo_rl/distributed/batched_data_dict.py:1011: with policy.sequence_packing and policy.dynamic_batching off, each of ${ranks} gets ${share} samples of the step (${step}), which is not a whole number of micro-batches of ${key} ${micro} (${where}): make --prompts-per-step × --group-size a multiple of GPUs × micro-batch = ${dp * micro}, --set ${key} to a divisor of ${share}, or turn policy.sequence_packing.enabled back on${fitting(whole)}`,
    );
  }
  return out;
}

/** The merged config's problems (none when it cannot say its sizes). */
export function batchSplitProblems(merged: Yaml): string[] {
  const sizes = batchSizes(merged);
  return sizes ? splitProblems(sizes) : [];
}

/** The value at a dotted path, following `${a.b}` interpolations (absolute ones) as OmegaConf would. */
function valueAt(config: Yaml, dotted: string, depth = 0): Yaml | undefined {
  let node: Yaml | undefined = config;
  for (const k of dotted.split('.')) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return undefined;
    node = node[k];
  }
  if (node === BASE_PLACEHOLDER) return undefined;
  const ref = typeof node === 'string' ? /^\$\{([A-Za-z_][\w.]*)\}$/.exec(node) : null;
  if (ref && depth < 8) return valueAt(config, ref[1]!, depth + 1);
  return node;
}
