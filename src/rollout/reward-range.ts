import type { Evaluation, RewardRange } from './evaluators/types.js';

export type { RewardRange } from './evaluators/types.js';

/*
 * Which rewards a rollout takes (issue 39, item 3): finite numbers in [LO, HI], [0, 1] unless
 * `--reward-range LO,HI` says otherwise (RewardRange, in evaluators/types.ts). A reward outside it
 * is not a score but a forfeit: one 1e308 in a group makes its std ∞ and every GRPO advantage 0
 * (stats.ts:26-31), and its leave-one-out advantage 1e308; a 7 on a [0, 1] task outweighs six
 * honest samples.
 */

/** Every Harbor task's convention (a reward is 0..1, trial.ts topReward) and the built-in evaluators' (1 or 0). */
export const DEFAULT_REWARD_RANGE: RewardRange = [0, 1];

/**
 * The largest |LO| or |HI| a range may have: stats.ts:26 squares (r − mean), which for rewards
 * 1e9 apart is 1e18, still finite and far from the 1.8e308 where the std would become ∞.
 */
export const RANGE_LIMIT = 1e9;

/** The words a forfeit for a reward outside the range says (checking/verdict.ts finds a task's scale mismatch by them). */
export const OUT_OF_RANGE = 'outside the reward range';

/**
 * A decimal number as a reward.txt may hold it: an optional sign, digits with an optional fraction
 * (or a fraction alone), an optional exponent; space around it allowed. This is what Python's
 * float() takes of a decimal string (Harbor reads reward.txt with it, verifier.py:67-80) less what
 * is not a plain decimal: `inf`/`nan` (not finite) and `1_000` (Python takes the underscore, a JS
 * Number() does not; neither is a verifier's way to write a score). JS Number() alone would also take
 * `0x1`, `0b1`, `0o1` and `Infinity`, which Python's float() refuses.
 */
const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** The number `text` writes as a decimal, or null when it is not one or is not finite (`1e999`). */
export function parseDecimal(text: string): number | null {
  const t = text.trim();
  if (!DECIMAL.test(t)) return null;
  // + 0: `-0` is the reward 0 (JSON would store it so anyway).
  const n = Number(t) + 0;
  return Number.isFinite(n) ? n : null;
}

/** `[LO, HI]` as a reason says it. */
export function rangeText(range: RewardRange): string {
  return `[${range[0]}, ${range[1]}]`;
}

/**
 * `--reward-range LO,HI`: two decimals (parseDecimal's shape: no hex, no `Infinity`), LO < HI,
 * each within ±RANGE_LIMIT. A comma, not a colon: `-1:1` reads like a time or a slice, and a comma
 * is how the range is printed back ([-1, 1]). Throws an Error whose message names the flag.
 */
export function parseRewardRange(value: string): RewardRange {
  const shape = `--reward-range must be LO,HI (two decimal numbers, LO < HI, e.g. 0,1 or -1,1), got ${JSON.stringify(value)}`;
  const parts = value.split(',');
  if (parts.length !== 2) throw new Error(shape);
  const [lo, hi] = parts.map(parseDecimal) as [number | null, number | null];
  if (lo === null || hi === null) throw new Error(shape);
  if (!(lo < hi)) throw new Error(`--reward-range ${value}: LO must be below HI (a range of one value gives every sample the same reward)`);
  if (Math.abs(lo) > RANGE_LIMIT || Math.abs(hi) > RANGE_LIMIT)
    throw new Error(`--reward-range ${value}: each end must be within ±${RANGE_LIMIT} (GRPO's std squares the rewards' spread)`);
  return [lo, hi];
}

/** Why `value` is not a reward the rollout takes; null when it is. */
export function rewardProblem(value: number, range: RewardRange): string | null {
  if (typeof value !== 'number' || !Number.isFinite(value)) return `is not a finite number (${String(value)})`;
  if (value < range[0] || value > range[1]) return `${value} is ${OUT_OF_RANGE} ${rangeText(range)} (a task scored on another scale: --reward-range LO,HI)`;
  return null;
}

/**
 * Every evaluator's result as the rollout keeps it (registry.ts evaluate runs each through this, and
 * step-stages.ts a multi-step sample's combined one): its reward and each trace reward must be
 * rewardProblem-free, else the sample forfeits, with the reason and never the value as its reward.
 * A forfeited sample scores the range's low end: 0 for [0, 1] (the 0 every evaluator gives a
 * forfeit), and for a range below or around 0 its worst reward, so that cutting a verifier short
 * never pays more than failing it (on [-1, 1] a forfeit scored 0 would beat a verifier's -1).
 */
export function boundedEvaluation(e: Evaluation, range: RewardRange = DEFAULT_REWARD_RANGE): Evaluation {
  const worst = range[0] + 0;
  if (typeof e.record.forfeit === 'string') return { reward: worst, traceRewards: null, record: e.record };
  const problem =
    withWhat('its reward', rewardProblem(e.reward, range)) ??
    (e.traceRewards ?? []).map((r, i) => withWhat(`its trace reward ${i}`, rewardProblem(r, range))).find((p) => p !== null) ??
    null;
  if (problem === null) return { ...e, reward: e.reward + 0 };
  // The metrics and the chosen key go with the reward: a report averaging `rewards` must not meet the value either.
  const { rewards: _rewards, reward_key: _key, ...record } = e.record;
  return {
    reward: worst,
    traceRewards: null,
    record: { ...record, forfeit: `the evaluator gave a reward the rollout does not take: ${problem}`, reward_range: [...range] },
  };
}

function withWhat(what: string, problem: string | null): string | null {
  return problem === null ? null : `${what} ${problem}`;
}
