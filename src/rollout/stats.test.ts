import { describe, expect, it } from 'vitest';
import { groupStats } from './stats.js';

describe('groupStats', () => {
  it('GRPO advantages are (r − mean) / (std + ε) with the unbiased std, and sum to zero', () => {
    const s = groupStats([1, 0, 1, 0]);
    expect(s.mean).toBe(0.5);
    expect(s.std).toBeCloseTo(Math.sqrt(1 / 3), 12);
    expect(s.advantages[0]).toBeCloseTo(0.5 / (Math.sqrt(1 / 3) + 1e-6), 12);
    expect(s.advantages.reduce((a, b) => a! + b!, 0)).toBeCloseTo(0, 12);
  });

  it('leave-one-out: r minus the mean of the others; sums to zero as well', () => {
    const s = groupStats([1, 0, 0]);
    expect(s.looAdvantages).toEqual([1, -0.5, -0.5]);
  });

  it('errors (null) take no part; equal rewards give zero advantage; a lone sample has no LOO baseline', () => {
    const s = groupStats([1, null, 1]);
    expect(s.rewarded).toBe(2);
    expect(s.advantages).toEqual([0, null, 0]);
    expect(groupStats([0.5]).looAdvantages).toEqual([null]);
    expect(groupStats([null, null])).toMatchObject({ rewarded: 0, mean: null, std: null });
  });
});
