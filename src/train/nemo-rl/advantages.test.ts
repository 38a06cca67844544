import { describe, expect, it } from 'vitest';
import { type AdvantageSample, batchAdvantages, gymResultSample } from './advantages.js';

/**
 * Checked against values worked by hand from NeMo-RL's formulas (7ea279a, algorithms/utils.py:104-197
 * and advantage_estimator.py:82-96), not against this module's own arithmetic.
 */
const GRPO = { leaveOneOut: true, normalize: true };
const sample = (firstPrompt: number[], reward: number, extra: Partial<AdvantageSample> = {}): AdvantageSample => ({
  firstPrompt,
  reward,
  maskSample: false,
  responseTokens: 1,
  ...extra,
});
const group = (rewards: number[], prompt = [1, 2, 3]) => rewards.map((r) => sample(prompt, r));

describe('batchAdvantages: NeMo-RL GRPO advantages', () => {
  it('a group of 4 sharing its first prompt, rewards [1,0,0,1], leave-one-out and normalised (NeMo-RL defaults)', () => {
    // Sample 0: the others are [0,0,1]: baseline 1/3, mean of squares 1/3, variance 1/3 − 1/9 = 2/9,
    // times m/(m−1) = 3/2 gives 1/3, std √(1/3); advantage (1 − 1/3) / (√(1/3) + 1e-6).
    const a = batchAdvantages(group([1, 0, 0, 1]), GRPO);
    const up = 2 / 3 / (Math.sqrt(1 / 3) + 1e-6);
    expect(a.groupSizes).toEqual([4]);
    expect(a.baseline).toEqual([1 / 3, 2 / 3, 2 / 3, 1 / 3].map((x) => expect.closeTo(x, 12)));
    expect(a.std.map((s) => s ** 2)).toEqual([1, 1, 1, 1].map(() => expect.closeTo(1 / 3, 12)));
    expect(a.advantages).toEqual([up, -up, -up, up].map((x) => expect.closeTo(x, 9)));
    expect(up).toBeCloseTo(1.1547, 4);
    expect(a.allZero).toBe(false);
    expect(a.stats['advantages/max']).toBeCloseTo(up, 9);
    expect(a.stats['advantages/min']).toBeCloseTo(-up, 9);
    expect(a.stats['advantages/mean']).toBeCloseTo(0, 12);
  });

  it('without leave-one-out: the group mean and the sample (n − 1) deviation', () => {
    // Mean 0.5; variance (4 · 0.25) / 3 = 1/3.
    const a = batchAdvantages(group([1, 0, 0, 1]), { leaveOneOut: false, normalize: true });
    const up = 0.5 / (Math.sqrt(1 / 3) + 1e-6);
    expect(a.baseline).toEqual([0.5, 0.5, 0.5, 0.5]);
    expect(a.advantages).toEqual([up, -up, -up, up].map((x) => expect.closeTo(x, 9)));
  });

  it('without normalisation: reward minus the mean of the others', () => {
    const a = batchAdvantages(group([1, 0, 0, 1]), { leaveOneOut: true, normalize: false });
    expect(a.advantages).toEqual([2 / 3, -2 / 3, -2 / 3, 2 / 3].map((x) => expect.closeTo(x, 12)));
  });

  it('a group whose first prompts all differ (a split group) gets all-zero advantages: each sample is its own baseline', () => {
    const split = [1, 0, 0, 1].map((r, i) => sample([1, 2, 3, 100 + i], r));
    const a = batchAdvantages(split, GRPO);
    expect(a.groupSizes).toEqual([1, 1, 1, 1]);
    expect(a.baseline).toEqual([1, 0, 0, 1]);
    expect(a.advantages).toEqual([0, 0, 0, 0]);
    expect(a.allZero).toBe(true);
    expect(a.stats).toEqual({ 'advantages/mean': 0, 'advantages/min': 0, 'advantages/max': 0 });
  });

  it('a group split in two halves: each half is its own group (two of two, leave-one-out: ±1 where rewards differ)', () => {
    // Leave-one-out in a pair: the baseline is the other reward; m = 1 makes m/(m−1) infinite and
    // 0 · ∞ NaN, which nan_to_num turns into std 0, so the advantage is not scaled.
    const a = batchAdvantages([sample([7], 1), sample([7], 0), sample([8], 1), sample([8], 1)], GRPO);
    expect(a.group).toEqual([0, 0, 1, 1]);
    expect(a.std).toEqual([0, 0, 0, 0]);
    expect(a.advantages).toEqual([1, -1, 0, 0]);
  });

  it('equal rewards: no variation, zero advantages (std 0 is not divided by)', () => {
    const a = batchAdvantages(group([1, 1, 1, 1]), GRPO);
    expect(a.advantages).toEqual([0, 0, 0, 0]);
    expect(a.allZero).toBe(true);
    // 0.7 three times sums to 2.0999999999999996: rounding noise, not a signal.
    const noisy = batchAdvantages(group([0.7, 0.7, 0.7, 0.7]), GRPO);
    expect(Math.max(...noisy.advantages.map(Math.abs))).toBeLessThan(1e-6);
    expect(noisy.allZero).toBe(true);
  });

  it('a masked sample leaves the loss but still counts for its siblings’ baseline', () => {
    const masked = group([1, 0, 0, 1]);
    masked[0] = { ...masked[0]!, maskSample: true };
    const a = batchAdvantages(masked, GRPO);
    const up = 2 / 3 / (Math.sqrt(1 / 3) + 1e-6);
    expect(a.advantages).toEqual([up, -up, -up, up].map((x) => expect.closeTo(x, 9)));
    expect(a.inLoss).toEqual([false, true, true, true]);
    // env.should_mask_flagged_samples: false keeps it in the loss.
    expect(batchAdvantages(masked, { ...GRPO, maskFlagged: false }).inLoss).toEqual([true, true, true, true]);
    // Only the masked sample varies from zero: nothing in the loss moves the policy.
    const onlyMasked = batchAdvantages([sample([1], 1, { maskSample: true }), sample([1], 0), sample([1], 0)], { leaveOneOut: false, normalize: false });
    expect(onlyMasked.advantages).toEqual([2 / 3, -1 / 3, -1 / 3].map((x) => expect.closeTo(x, 12)));
    expect(onlyMasked.allZero).toBe(false);
    const allZeroInLoss = batchAdvantages([sample([1], 1, { maskSample: true }), sample([2], 0)], GRPO);
    expect(allZeroInLoss.allZero).toBe(true);
  });

  it('prompts that differ only by trailing pad ids are one row once padded (torch.unique on the padded batch)', () => {
    expect(batchAdvantages([sample([5, 6], 1), sample([5, 6, 0], 0)], { ...GRPO, padTokenId: 0 }).groupSizes).toEqual([2]);
    expect(batchAdvantages([sample([5, 6], 1), sample([5, 6, 0], 0)], GRPO).groupSizes).toEqual([1, 1]);
  });

  it('logs token-weighted statistics over response tokens, and clips when asked', () => {
    // Non-LOO, unnormalised: mean 0.25, advantages [0.75, −0.25, −0.25, −0.25]; tokens [1, 3, 0, 0].
    const s = group([1, 0, 0, 0]).map((x, i) => ({ ...x, responseTokens: [1, 3, 0, 0][i]! }));
    const a = batchAdvantages(s, { leaveOneOut: false, normalize: false });
    expect(a.stats['advantages/mean']).toBeCloseTo((0.75 - 3 * 0.25) / 4, 12);
    expect(a.stats['advantages/min']).toBeCloseTo(-0.25, 12);
    expect(a.stats['advantages/max']).toBeCloseTo(0.75, 12);
    const clipped = batchAdvantages(group([1, 0, 0, 0]), { leaveOneOut: false, normalize: false, clipLow: -0.1, clipHigh: 0.5 });
    expect(clipped.advantages).toEqual([0.5, -0.1, -0.1, -0.1]);
  });
});

describe('gymResultSample: a /run result as NeMo-RL reads it', () => {
  it("takes the first trainable item's prompt, the reward, instance_config.mask_sample (not a top-level one) and every generated token", () => {
    const item = (prompt: number[], gen: number[]) => ({
      type: 'message',
      prompt_token_ids: prompt,
      generation_token_ids: gen,
      generation_log_probs: gen.map(() => 0),
    });
    const output = [{ type: 'reasoning', generation_token_ids: [] }, item([1, 2], [3, 4]), { type: 'function_call_output' }, item([1, 2, 3, 4, 5], [6])];
    expect(gymResultSample({ reward: 0.5, response: { output }, instance_config: { mask_sample: true } })).toEqual({
      firstPrompt: [1, 2],
      reward: 0.5,
      maskSample: true,
      responseTokens: 3,
    });
    expect(gymResultSample({ reward: 1, response: { output }, mask_sample: true } as never)?.maskSample).toBe(false);
    expect(gymResultSample({ reward: 1, response: { output: [{ type: 'function_call_output' }] } })).toBeNull();
  });
});
