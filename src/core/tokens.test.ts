import { describe, expect, it } from 'vitest';
import { commonPrefixLength, sameIds, tokenProblems } from './tokens.js';

describe('tokenProblems', () => {
  const ok = { source: 'upstream' as const, promptIds: [1, 2], sampledIds: [3, 4, 5], logprobs: [-1, -0.5, -9999] };

  it('finds nothing wrong with consistent data', () => {
    expect(tokenProblems(ok, { promptTokens: 2, completionTokens: 3 })).toEqual([]);
  });

  it('names length and usage mismatches without fixing anything', () => {
    expect(tokenProblems({ ...ok, logprobs: [-1] }, { promptTokens: 5, completionTokens: 3 })).toEqual([
      '3 sampled ids but 1 logprobs',
      'usage.prompt_tokens is 5 but 2 prompt ids',
    ]);
  });

  it('flags logprobs that are not finite or are positive', () => {
    expect(tokenProblems({ ...ok, logprobs: [-1, Number.NaN, 0.1] })).toEqual(['logprob at position 1 is NaN, not a finite value <= 0']);
  });

  it('flags missing ids from a server that should have sent them; text-only calls have none to check', () => {
    expect(tokenProblems({ source: 'upstream', promptIds: null, sampledIds: [1], logprobs: [-1] })).toEqual(['upstream returned no prompt token ids']);
    expect(tokenProblems({ source: 'none', promptIds: null, sampledIds: null, logprobs: null })).toEqual([]);
  });
});

describe('commonPrefixLength and sameIds', () => {
  it('agree with a plain loop wherever two sequences part, typed or not, across block sizes', () => {
    const plain = (a: ArrayLike<number>, b: ArrayLike<number>) => {
      let i = 0;
      while (i < Math.min(a.length, b.length) && a[i] === b[i]) i++;
      return i;
    };
    const base = Uint32Array.from({ length: 9000 }, (_, i) => (i * 2654435761) >>> 0);
    for (const at of [0, 1, 63, 64, 65, 1023, 4095, 4096, 4097, 8191, 8999, 9000]) {
      const other = base.slice();
      if (at < other.length) other[at] = other[at]! ^ 1;
      for (const [a, b] of [
        [base, other],
        [base, Array.from(other)],
        [Array.from(base), other],
        [base.subarray(0, 5000), other],
      ] as [ArrayLike<number>, ArrayLike<number>][]) {
        expect(commonPrefixLength(a, b), `part at ${at}`).toBe(plain(a, b));
        const n = plain(a, b);
        expect(sameIds(a, 0, b, 0, n)).toBe(true);
        if (n < Math.min(a.length, b.length)) expect(sameIds(a, 0, b, 0, n + 1)).toBe(false);
      }
    }
    // Ranges at different offsets (a typed array viewing the middle of another's buffer).
    expect(sameIds(base.subarray(10), 0, base, 10, 100)).toBe(true);
    expect(sameIds(base, 1, base, 2, 10)).toBe(false);
  });
});
