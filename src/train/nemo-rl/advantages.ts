/**
 * GRPO advantages for one NeMo Gym batch, computed the way NeMo-RL computes them (pure). Every step
 * below was read at NeMo-RL 7ea279a; the file:line is beside it. polar's NeMo-RL stand-in
 * (test/support/fake-nemo-rl/launcher.mjs) computes its advantages with this, so a batch whose
 * samples of one task do not share a first prompt shows the all-zero advantages NeMo-RL would give
 * it, and `polar train` can say so.
 *
 * 1. Groups are NOT dataset rows: a sample's group is the token ids of its first prompt. The Gym
 *    path keeps `input_message_log = message_log[:1]` (environments/nemo_gym.py:1012), the first
 *    trainable output item's whole `prompt_token_ids` (nemo_gym.py:840-902: nothing is seen before
 *    the first item, so its "new" prompt ids are all of them); rollouts.py:2758-2767 flattens those
 *    into `input_ids`, padded with the tokenizer's pad id; grpo.py:3116-3128 rebuilds the same rows as
 *    `prompt_ids_for_adv`; grpo.py:3294-3296 hands them to the estimator, whose baseline groups by
 *    `torch.unique(prompts, dim=0)` (algorithms/utils.py:132, :146-150). Padding makes a prompt equal
 *    to another plus trailing pad ids the same row: `padTokenId` reproduces that.
 * 2. Every sample counts for the baseline, masked or not: GRPOAdvantageEstimator passes
 *    `torch.ones_like(rewards)` as the valid mask (advantage_estimator.py:82-87).
 * 3. A group of one (utils.py:156-159): baseline = its own reward, std 0, so advantage 0.
 * 4. Otherwise (utils.py:160-196), with n samples and m = n − 1 under the leave-one-out baseline
 *    (`grpo.use_leave_one_out_baseline`, default true, grpo.py:253) or m = n without it: baseline_i =
 *    the sum of the rewards its mask row keeps (all but i, or all) / m; std_i = sqrt((mean of squares
 *    − baseline²) · m/(m − 1)), with NaN turned into 0 and +inf into float32's largest value
 *    (`nan_to_num(0)`); so leave-one-out in a group of two has std 0.
 * 5. advantage = reward − baseline (advantage_estimator.py:88); with `grpo.normalize_rewards`
 *    (default true, grpo.py:247) divided by (std + 1e-6) only where std > 0
 *    (advantage_estimator.py:90-96: "don't sharpen the ones with no variation").
 * 6. Clipped to `grpo.advantage_clip_low/high` when set (grpo.py:2302-2313, applied at :3321).
 * 7. A sample whose result says `instance_config.mask_sample` leaves the loss (loss_multiplier 0,
 *    grpo.py:2155-2169 applied at :3147; carried unless `env.should_mask_flagged_samples: false`,
 *    rollouts.py:1819, :2793-2794) but kept its part in the baseline (2.).
 * 8. The logged statistics (grpo.py:3421-3446): `advantages/mean`, `/min`, `/max` over response
 *    tokens (`token_loss_mask`, which does not include the sample mask: masked samples count here
 *    too), 0.0 when there are none; `advantages/sum` (grpo.py:2450) sums the advantages expanded to
 *    the padded [batch, sequence] shape, so it is Σ A_i × the padded sequence length.
 * Not modelled: DAPO dynamic sampling, reward shaping and penalties, GDPO / Reinforce++ estimators.
 */
export interface AdvantageConfig {
  /** `grpo.use_leave_one_out_baseline` (NeMo-RL's default: true). */
  leaveOneOut: boolean;
  /** `grpo.normalize_rewards` (NeMo-RL's default: true). */
  normalize: boolean;
  /** `grpo.advantage_clip_low` / `advantage_clip_high` (default: none). */
  clipLow?: number | null;
  clipHigh?: number | null;
  /** `env.should_mask_flagged_samples` (absent: true). */
  maskFlagged?: boolean;
  /** The tokenizer's pad id, when known: rows are padded with it before they are compared. */
  padTokenId?: number;
}

/** One sample of the batch, as NeMo-RL reads it from its `/run` result. */
export interface AdvantageSample {
  /** The first trainable output item's `prompt_token_ids`. */
  firstPrompt: readonly number[];
  reward: number;
  /** `instance_config.mask_sample`. */
  maskSample: boolean;
  /** Response tokens (the generation ids of every trainable item): the weight of its advantage in the logged mean. */
  responseTokens: number;
}

export interface BatchAdvantages {
  /** The group (index into `groupSizes`) each sample is in, numbered in order of first appearance. */
  group: number[];
  groupSizes: number[];
  baseline: number[];
  std: number[];
  advantages: number[];
  /** Samples that stay in the loss (not masked). */
  inLoss: boolean[];
  /** NeMo-RL's logger keys (grpo.py:3439-3446). */
  stats: { 'advantages/mean': number; 'advantages/min': number; 'advantages/max': number };
  /** True when no sample in the loss has an advantage beyond ±ZERO_ADVANTAGE: this step cannot move the policy. */
  allZero: boolean;
}

const EPSILON = 1e-6; // advantage_estimator.py:92
/**
 * What counts as a zero advantage: equal rewards that are not whole numbers (0.7, 0.7, 0.7, 0.7)
 * leave rounding noise in the baseline (about 1e-10 after normalisation, in NeMo-RL's float32 as
 * here), which moves nothing.
 */
export const ZERO_ADVANTAGE = 1e-6;
const FLOAT32_MAX = 3.4028234663852886e38; // what nan_to_num turns +inf into for float32 rewards

export function batchAdvantages(samples: readonly AdvantageSample[], config: AdvantageConfig): BatchAdvantages {
  const keys = samples.map((s) => promptKey(s.firstPrompt, config.padTokenId));
  const groupOf = new Map<string, number>();
  const group = keys.map((k) => {
    if (!groupOf.has(k)) groupOf.set(k, groupOf.size);
    return groupOf.get(k)!;
  });
  const groupSizes = [...groupOf.values()].map((g) => group.filter((x) => x === g).length);
  const rewards = samples.map((s) => s.reward);
  const baseline = new Array<number>(samples.length).fill(0);
  const std = new Array<number>(samples.length).fill(0);
  for (let g = 0; g < groupSizes.length; g++) {
    const members = group.flatMap((x, i) => (x === g ? [i] : []));
    if (members.length <= 1) {
      for (const i of members) baseline[i] = rewards[i]!; // utils.py:156-159
      continue;
    }
    const m = members.length - (config.leaveOneOut ? 1 : 0); // utils.py:161-163
    for (const i of members) {
      const kept = config.leaveOneOut ? members.filter((j) => j !== i) : members; // utils.py:149-154
      const b = kept.reduce((a, j) => a + rewards[j]!, 0) / m;
      const sq = kept.reduce((a, j) => a + rewards[j]! ** 2, 0) / m;
      baseline[i] = b;
      std[i] = nanToNum(Math.sqrt((sq - b * b) * (m / (m - 1)))); // utils.py:187-196
    }
  }
  const advantages = rewards.map((r, i) => {
    let a = r - baseline[i]!;
    if (config.normalize && std[i]! > 0) a /= std[i]! + EPSILON;
    if (config.clipLow != null) a = Math.max(a, config.clipLow);
    if (config.clipHigh != null) a = Math.min(a, config.clipHigh);
    return a;
  });
  const inLoss = samples.map((s) => !(s.maskSample && config.maskFlagged !== false));
  const weighted = samples.filter((s) => s.responseTokens > 0);
  const tokens = weighted.reduce((a, s) => a + s.responseTokens, 0);
  const withTokens = advantages.filter((_, i) => samples[i]!.responseTokens > 0);
  const stats = {
    'advantages/mean': tokens > 0 ? samples.reduce((a, s, i) => a + advantages[i]! * s.responseTokens, 0) / tokens : 0,
    'advantages/min': withTokens.length > 0 ? Math.min(...withTokens) : 0,
    'advantages/max': withTokens.length > 0 ? Math.max(...withTokens) : 0,
  };
  return { group, groupSizes, baseline, std, advantages, inLoss, stats, allZero: advantages.every((a, i) => !inLoss[i] || Math.abs(a) <= ZERO_ADVANTAGE) };
}

/**
 * One `/run` result as NeMo-RL reads it for the advantages (nemo_gym.py:822-1012): its first
 * trainable item's (non-empty `generation_token_ids`) prompt ids, its reward, `instance_config.mask_sample`
 * (rollouts.py:266-278; a top-level `mask_sample` is not read) and its response tokens. Null when it has
 * no trainable item (NeMo-RL raises on such a result, nemo_gym.py:973-997).
 */
export function gymResultSample(result: {
  reward: number;
  response: { output: readonly Record<string, unknown>[] };
  instance_config?: unknown;
}): AdvantageSample | null {
  const trainable = result.response.output.filter((item) => Array.isArray(item.generation_token_ids) && item.generation_token_ids.length > 0);
  const first = trainable[0];
  if (!first || !Array.isArray(first.prompt_token_ids)) return null;
  const config = result.instance_config;
  return {
    firstPrompt: first.prompt_token_ids as number[],
    reward: result.reward,
    // bool((instance_config or {}).get("mask_sample", False)): any truthy value masks.
    maskSample: typeof config === 'object' && config !== null && Boolean((config as { mask_sample?: unknown }).mask_sample),
    responseTokens: trainable.reduce((n, item) => n + (item.generation_token_ids as unknown[]).length, 0),
  };
}

/** A row of `torch.unique(prompts, dim=0)`: trailing pad ids are padding, so they do not tell rows apart. */
function promptKey(ids: readonly number[], pad: number | undefined): string {
  let end = ids.length;
  if (pad !== undefined) while (end > 0 && ids[end - 1] === pad) end--;
  return ids.slice(0, end).join(',');
}

function nanToNum(x: number): number {
  if (Number.isNaN(x)) return 0;
  return x === Number.POSITIVE_INFINITY ? FLOAT32_MAX : x;
}
