import { describe, expect, it } from 'vitest';
import type { TokenText } from '../trajectory/types.js';
import { callStrip, layoutStrip, logprobBand, searchLines, TokenPieces, traceStrip, visible } from './token-strip.js';

const TEXT: TokenText = {
  decode: (ids) => ids.map((id) => ['Hello', ' world', '\n', 'x'.repeat(12), '\t', '<|im_end|>'][id] ?? '?').join(''),
  isSpecial: (id) => id === 5,
};

describe('token strips', () => {
  it('a call: prompt from a point, then sampled with their logprobs; a trace: the loss mask decides sampled or context', () => {
    expect(callStrip([1, 2, 3], [4, 5], [-0.1, -2], 1)).toEqual([
      { id: 2, kind: 'prompt', logprob: null },
      { id: 3, kind: 'prompt', logprob: null },
      { id: 4, kind: 'sampled', logprob: -0.1 },
      { id: 5, kind: 'sampled', logprob: -2 },
    ]);
    expect(
      traceStrip({ prompt_ids: [1], response_ids: [2, 3, 4], loss_mask: [1, 0, 1], response_logprobs: [-0.5, 0, -0.25] }).map((t) => `${t.kind}:${t.logprob}`),
    ).toEqual(['prompt:null', 'sampled:-0.5', 'context:null', 'sampled:-0.25']);
  });

  it('logprob bands are p ≥ 0.9, 0.5, 0.1, 0.01 and below; none without a logprob', () => {
    expect([0, Math.log(0.9), Math.log(0.89), Math.log(0.5), Math.log(0.2), Math.log(0.01), Math.log(0.009), null].map(logprobBand)).toEqual([
      0,
      0,
      1,
      1,
      2,
      3,
      4,
      null,
    ]);
  });

  it('lays tokens out whole, breaking after newlines and splitting only tokens wider than a line', () => {
    const pieces = new TokenPieces(TEXT);
    const strip = callStrip([0, 1, 2, 0], [3, 4, 5], null);
    const lines = layoutStrip(strip, pieces, 10);
    expect(lines.map((l) => l.map((s) => s.text).join(''))).toEqual(['Hello', ' world↵', 'Hello', 'xxxxxxxxxx', 'xx→', '<|im_end|>']);
    // Every segment points back at its token.
    expect(lines[3]![0]!.index).toBe(4);
    expect(lines[4]!.map((s) => s.index)).toEqual([4, 5]);
    expect(layoutStrip(strip, pieces, 40, '│').map((l) => l.map((s) => s.text).join(''))[0]).toBe('Hello│ world│↵');
    expect(searchLines(lines, 'WORLD')).toEqual([1]);
  });

  it('shows ids without a tokenizer, and control characters escaped', () => {
    expect(new TokenPieces().piece(42)).toBe('⟨42⟩');
    expect(visible('a\nb\tc\rd\u0001')).toBe('a↵b→c␍d\\x01');
  });
});
