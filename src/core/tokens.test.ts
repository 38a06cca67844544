import { describe, expect, it } from 'vitest';
import { tokenProblems } from './tokens.js';

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
