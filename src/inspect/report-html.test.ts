import { describe, expect, it } from 'vitest';
import { namedRewards } from './report-html.js';

describe("polar report's per-group means of a Harbor verifier's metrics", () => {
  it('a reward.json of metrics only (no "reward") shows each metric, a sample without one counting 0 as in Harbor (metrics/base.py:30-35)', () => {
    const harbor = (rewards: Record<string, number> | null, reward: number | null) => ({
      reward,
      evaluator: { type: 'harbor', ...(rewards ? { rewards } : {}), ...(rewards ? {} : { forfeit: 'the verifier was killed' }) },
    });
    const line = namedRewards([
      harbor({ correctness: 1, quality: 0.5 }, 1),
      harbor({ correctness: 0, quality: 1 }, 0),
      // Its verifier was cut short: 0 on every metric, not left out of the mean.
      harbor(null, 0),
      // Ended in error (masked, no reward): not in the group's statistics at all.
      { reward: null, evaluator: null },
    ]);
    expect(line).toBe('correctness 0.3333 · quality 0.5');
  });

  it('"reward" itself is the rewards column, not repeated', () => {
    expect(namedRewards([{ reward: 1, evaluator: { type: 'harbor', rewards: { reward: 1 } } }])).toBe('');
  });
});
