import { describe, expect, it } from 'vitest';
import type { CallTokens } from '../types.js';
import { perRequest } from './per-request.js';
import { createPrefixMerging, prefixMerging } from './prefix-merging.js';

/**
 * The store hands strategies typed arrays (views of its columns, store/delta-read.ts); tests and
 * other callers hand them JS arrays. Both must give the same traces, as plain JS arrays.
 */
const call = (requestId: string, seq: number, promptIds: number[], sampledIds: number[], extra: Partial<CallTokens> = {}): CallTokens => ({
  requestId,
  agentId: 'main',
  seq,
  promptIds,
  sampledIds,
  logprobs: sampledIds.map((_, i) => -(i + 1) / 10 - 1e-17 * i),
  finishReason: 'stop',
  ...extra,
});

const typed = (c: CallTokens): CallTokens => ({
  ...c,
  promptIds: Uint32Array.from(c.promptIds),
  sampledIds: Uint32Array.from(c.sampledIds),
  logprobs: c.logprobs && Float64Array.from(c.logprobs),
});

const head = Array.from({ length: 5000 }, (_, i) => (i * 7919) % 151_000);
const sessions: Record<string, CallTokens[]> = {
  merges: [
    call('r1', 1, [900, ...head], [1, 2, 902]),
    call('r2', 2, [900, ...head, 1, 2, 902, 903, 11], [3, 902]),
    call('r3', 3, [900, ...head, 1, 2, 902, 903, 11, 3, 902, 5], [4]),
  ],
  breaks: [call('r1', 1, [900, 10, 11, 12], [1]), call('r2', 2, [900, 7, 903], [2]), call('r3', 3, [900, 7, 903, 2, 8], [6])],
  'length-cut and a call without logprobs': [
    call('r1', 1, [900, 10], [1, 2], { finishReason: 'length' }),
    call('r2', 2, [900, 10, 1, 2, 902, 903, 11], [3], { logprobs: null }),
  ],
  'sub-agents': [call('a1', 1, [900, 10], [1]), call('b1', 2, [900, 10, 1, 5], [2], { agentId: 'helper' }), call('a2', 3, [900, 10, 1, 7], [3])],
  rerendered: [
    call('r1', 1, [900, 10], [1, 2, 902]),
    call('r2', 2, [900, 10, 4, 902, 903, 11], [3, 902]),
    call('r3', 3, [900, 10, 4, 902, 903, 11, 3, 902, 903, 12], [5, 902]),
  ],
};

describe('strategies read typed ids as they read arrays', () => {
  for (const [name, calls] of Object.entries(sessions)) {
    it(name, () => {
      for (const strategy of [perRequest, prefixMerging, createPrefixMerging({ allowRerender: true })]) {
        const fromArrays = strategy.run(calls);
        const fromTyped = strategy.run(calls.map(typed));
        expect(fromTyped).toEqual(fromArrays);
        for (const t of fromTyped.traces) {
          for (const field of [t.prompt_ids, t.response_ids, t.loss_mask, t.response_logprobs ?? []]) expect(Array.isArray(field)).toBe(true);
          t.response_logprobs?.forEach((lp, i) => expect(Object.is(lp, fromArrays.traces[fromTyped.traces.indexOf(t)]!.response_logprobs![i])).toBe(true));
        }
      }
    });
  }

  it('an id a typed chain cannot hold unchanged is refused, never rounded into one', () => {
    expect(() => prefixMerging.run([call('r1', 1, [900, -1], [1])])).toThrow(/not a uint32: -1/);
  });
});
