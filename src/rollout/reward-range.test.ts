import { describe, expect, it } from 'vitest';
import { boundedEvaluation, DEFAULT_REWARD_RANGE, OUT_OF_RANGE, parseDecimal, parseRewardRange, rewardProblem } from './reward-range.js';

describe('parseDecimal: a plain decimal, as a reward.txt holds one', () => {
  it('takes a sign, digits, a fraction and an exponent, with space around', () => {
    for (const [text, n] of [
      ['1', 1],
      [' 0.5\n', 0.5],
      ['-0', 0],
      ['+2', 2],
      ['.25', 0.25],
      ['3.', 3],
      ['1e-3', 0.001],
      ['-1E+2', -100],
      ['1e308', 1e308],
    ] as const)
      expect(parseDecimal(text), text).toBe(n);
  });

  it("refuses what JS Number() takes beyond it (hex, binary, octal, Infinity) and what Python's float() does (1_0, inf, nan)", () => {
    for (const text of [
      '0x1',
      '0X1',
      '0b1',
      '0o1',
      'Infinity',
      '-Infinity',
      'NaN',
      'inf',
      'nan',
      '1_0',
      '1_000',
      '1e999',
      '',
      '  ',
      '1,5',
      '1 1',
      '--1',
      '1e',
      'e5',
      '.',
      '+',
      '0x1p3',
      '１',
    ])
      expect(parseDecimal(text), JSON.stringify(text)).toBeNull();
  });
});

describe('--reward-range LO,HI', () => {
  it('two decimals, LO < HI', () => {
    expect(parseRewardRange('0,1')).toEqual([0, 1]);
    expect(parseRewardRange('-1,1')).toEqual([-1, 1]);
    expect(parseRewardRange(' 0 , 100 ')).toEqual([0, 100]);
    expect(parseRewardRange('-0,0.5')).toEqual([0, 0.5]);
    expect(Object.is(parseRewardRange('-0,0.5')[0], 0)).toBe(true);
  });

  it('anything else is refused, with the shape it needs', () => {
    for (const bad of ['', '1', '0:1', '0;1', '0,1,2', '0,', ',1', '0x0,1', '0,Infinity', 'NaN,1', '0,1_0', 'a,b'])
      expect(() => parseRewardRange(bad), bad).toThrow(/--reward-range must be LO,HI \(two decimal numbers, LO < HI/);
    expect(() => parseRewardRange('1,0')).toThrow(/LO must be below HI/);
    expect(() => parseRewardRange('1,1')).toThrow(/LO must be below HI/);
    expect(() => parseRewardRange('0,1e10')).toThrow(/within ±1000000000/);
    expect(() => parseRewardRange('-1e308,1e308')).toThrow(/within ±1000000000/);
  });
});

describe('boundedEvaluation: a reward outside the range forfeits', () => {
  const e = (reward: number, traceRewards: number[] | null = null, record: Record<string, unknown> = {}) => ({
    reward,
    traceRewards,
    record: { type: 'x', ...record },
  });

  it('keeps a reward in range, its ends included', () => {
    expect(boundedEvaluation(e(1))).toEqual(e(1));
    expect(boundedEvaluation(e(0, [0, 0.5, 1]))).toEqual(e(0, [0, 0.5, 1]));
    expect(boundedEvaluation(e(7), [0, 10])).toEqual(e(7));
    expect(boundedEvaluation(e(-1), [-1, 1])).toEqual(e(-1));
  });

  it('1e308, -1e6, 7, NaN, Infinity on [0, 1]: 0 with the reason, never the value (nor the metrics holding it)', () => {
    for (const bad of [1e308, -1e6, 7, Number.NaN, Number.POSITIVE_INFINITY, 1.0000001, -1e-9]) {
      const out = boundedEvaluation(e(bad, null, { rewards: { reward: bad }, reward_key: 'reward' }), DEFAULT_REWARD_RANGE);
      expect(out.reward).toBe(0);
      expect(out.traceRewards).toBeNull();
      expect(out.record.forfeit).toMatch(/^the evaluator gave a reward the rollout does not take: its reward /);
      expect(out.record).not.toHaveProperty('rewards');
      expect(out.record).not.toHaveProperty('reward_key');
      expect(out.record.reward_range).toEqual([0, 1]);
    }
    expect(boundedEvaluation(e(7)).record.forfeit).toContain(`7 is ${OUT_OF_RANGE} [0, 1] (a task scored on another scale: --reward-range LO,HI)`);
  });

  it('a trace reward out of range forfeits the sample too', () => {
    const out = boundedEvaluation(e(1, [1, 1e308]));
    expect(out).toMatchObject({ reward: 0, traceRewards: null });
    expect(out.record.forfeit).toMatch(/its trace reward 1 1e\+308 is outside the reward range/);
  });

  it("a forfeit scores the range's low end: cutting the verifier short never beats failing it", () => {
    expect(boundedEvaluation(e(0, null, { forfeit: 'timed out' }), [-1, 1])).toEqual({
      reward: -1,
      traceRewards: null,
      record: { type: 'x', forfeit: 'timed out' },
    });
    expect(boundedEvaluation(e(0, null, { forfeit: 'timed out' })).reward).toBe(0);
  });

  it('says why a value is not taken', () => {
    expect(rewardProblem(0.5, [0, 1])).toBeNull();
    expect(rewardProblem(Number.NaN, [0, 1])).toMatch(/not a finite number/);
  });
});
