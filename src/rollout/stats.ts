/**
 * GRPO group statistics, from one group's rewards (null: a sample that ended without a reward, an
 * infrastructure error; it takes no part). Pure.
 * - `mean`, `std`: over the rewarded samples; std is the unbiased sample deviation (n − 1), as
 *   `torch.std` computes it by default; 0 for a single sample.
 * - GRPO advantage: (r − mean) / (std + ε), ε = 1e-6 (a group whose rewards are all equal gets 0).
 * - Leave-one-out advantage: r − the mean of the other rewarded samples (RLOO), unscaled; null when
 *   the sample is the only one rewarded.
 */
export const ADVANTAGE_EPSILON = 1e-6;

export interface GroupStats {
  rewarded: number;
  mean: number | null;
  std: number | null;
  advantages: (number | null)[];
  looAdvantages: (number | null)[];
}

export function groupStats(rewards: readonly (number | null)[]): GroupStats {
  const scored = rewards.filter((r): r is number => r !== null);
  const n = scored.length;
  if (n === 0) return { rewarded: 0, mean: null, std: null, advantages: rewards.map(() => null), looAdvantages: rewards.map(() => null) };
  const sum = scored.reduce((a, b) => a + b, 0);
  const mean = sum / n;
  const std = n > 1 ? Math.sqrt(scored.reduce((a, r) => a + (r - mean) ** 2, 0) / (n - 1)) : 0;
  return {
    rewarded: n,
    mean,
    std,
    advantages: rewards.map((r) => (r === null ? null : (r - mean) / (std + ADVANTAGE_EPSILON))),
    looAdvantages: rewards.map((r) => (r === null || n < 2 ? null : r - (sum - r) / (n - 1))),
  };
}
