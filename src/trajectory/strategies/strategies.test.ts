import { describe, expect, it } from 'vitest';
import type { CallTokens, TokenText } from '../types.js';
import { perRequest } from './per-request.js';
import { createPrefixMerging, prefixMerging } from './prefix-merging.js';

const call = (requestId: string, seq: number, promptIds: number[], sampledIds: number[], extra: Partial<CallTokens> = {}): CallTokens => ({
  requestId,
  agentId: 'main',
  seq,
  promptIds,
  sampledIds,
  logprobs: sampledIds.map((_, i) => -(i + 1) / 10),
  finishReason: 'stop',
  ...extra,
});

// A toy vocabulary: 900+ are special tokens; others decode to their own letter(s).
const WORDS: Record<number, string> = { 1: 'a', 2: 'b', 3: 'c', 4: 'ab', 5: 'x', 6: 'y', 7: 'z', 8: '\n', 9: ' ' };
const text: TokenText = { decode: (ids) => ids.map((i) => WORDS[i] ?? `<${i}>`).join(''), isSpecial: (id) => id >= 900 };

describe('per-request', () => {
  it('one trace per call, all response tokens trainable with their logprobs', () => {
    const { traces } = perRequest.run([call('r1', 1, [10, 11], [1, 2]), call('r2', 2, [10, 11, 1, 2, 12], [3])]);
    expect(traces.map((t) => [t.request_ids, t.prompt_ids, t.response_ids, t.loss_mask, t.response_logprobs])).toEqual([
      [['r1'], [10, 11], [1, 2], [1, 1], [-0.1, -0.2]],
      [['r2'], [10, 11, 1, 2, 12], [3], [1], [-0.1]],
    ]);
  });
});

describe('prefix-merging (faithful)', () => {
  it('joins calls whose prompt extends the chain; the context between turns is mask 0', () => {
    const { traces, breaks } = prefixMerging.run([
      call('r1', 1, [900, 10, 901], [1, 2, 902]),
      call('r2', 2, [900, 10, 901, 1, 2, 902, 903, 11, 901], [3, 902]),
    ]);
    expect(breaks).toEqual([]);
    expect(traces).toHaveLength(1);
    expect(traces[0]).toMatchObject({
      request_ids: ['r1', 'r2'],
      prompt_ids: [900, 10, 901],
      response_ids: [1, 2, 902, 903, 11, 901, 3, 902],
      loss_mask: [1, 1, 1, 0, 0, 0, 1, 1],
      response_logprobs: [-0.1, -0.2, -0.3, 0, 0, 0, -0.1, -0.2],
    });
  });

  it('a length-cut turn: the end-of-turn token the sampled ids lack joins as context', () => {
    const { traces, breaks } = prefixMerging.run([
      call('r1', 1, [900, 10], [1, 2], { finishReason: 'length' }),
      call('r2', 2, [900, 10, 1, 2, 902, 903, 11], [3]),
    ]);
    expect(breaks).toEqual([]);
    expect(traces[0]!.loss_mask).toEqual([1, 1, 0, 0, 0, 1]);
  });

  it('a re-rendered answer with the same text but other ids breaks as retoken; nothing is dropped', () => {
    // The model sampled [1, 2] ("ab" split in two); the template re-renders it as [4] ("ab").
    const { traces, breaks } = prefixMerging.run([call('r1', 1, [900, 10], [1, 2, 902]), call('r2', 2, [900, 10, 4, 902, 903, 11], [3])], text);
    expect(traces.map((t) => t.request_ids)).toEqual([['r1'], ['r2']]);
    expect(breaks).toEqual([{ requestId: 'r2', seq: 2, agentId: 'main', previousRequestId: 'r1', class: 'retoken', position: 2 }]);
  });

  it('different special tokens around the same text break as template', () => {
    const { breaks } = prefixMerging.run([call('r1', 1, [900, 10], [1, 902]), call('r2', 2, [900, 10, 1, 905, 903], [3])], text);
    expect(breaks[0]!.class).toBe('template');
  });

  it('a re-render that differs only in whitespace (Qwen3\'s "\\n" before <tool_call>) breaks as template, not rewrite', () => {
    // Sampled "a<tool_call>…" straight after the text; the template renders "a\n<tool_call>…" with its own spacing.
    const { breaks } = prefixMerging.run([call('r1', 1, [900, 10], [1, 2, 3, 902]), call('r2', 2, [900, 10, 1, 8, 2, 9, 3, 902, 903], [5])], text);
    expect(breaks[0]!.class).toBe('template');
  });

  it('changed history (stripped thinking, compaction) breaks as rewrite; without a tokenizer, other', () => {
    const stripped = [call('r1', 1, [900, 10], [5, 6, 1, 902]), call('r2', 2, [900, 10, 1, 902, 903], [3])];
    expect(prefixMerging.run(stripped, text).breaks[0]!.class).toBe('rewrite');
    expect(prefixMerging.run(stripped).breaks[0]!.class).toBe('other');
    const compacted = [call('r1', 1, [900, 10, 11, 12], [1]), call('r2', 2, [900, 7, 903], [2])];
    expect(prefixMerging.run(compacted).breaks[0]).toMatchObject({ class: 'rewrite', position: 1 });
  });

  it('sub-agents never merge into each other, even when one extends the other', () => {
    const { traces, breaks } = prefixMerging.run([
      call('m1', 1, [900, 10], [1]),
      call('s1', 2, [900, 10, 1, 11], [2], { agentId: 'sub' }),
      call('m2', 3, [900, 10, 1, 12], [3]),
      call('s2', 4, [900, 10, 1, 11, 2, 13], [4], { agentId: 'sub' }),
    ]);
    expect(breaks).toEqual([]);
    expect(traces.map((t) => [t.agent_id, t.request_ids])).toEqual([
      ['main', ['m1', 'm2']],
      ['sub', ['s1', 's2']],
    ]);
  });

  it('a call without logprobs makes the whole trace null-logprob, never a fabricated value', () => {
    const { traces } = prefixMerging.run([call('r1', 1, [1], [2]), call('r2', 2, [1, 2, 3], [4], { logprobs: null })]);
    expect(traces[0]!.response_logprobs).toBeNull();
    expect(traces[0]!.loss_mask).toEqual([1, 0, 1]);
  });
});

describe('prefix-merging --allow-rerender', () => {
  const loose = createPrefixMerging({ allowRerender: true });
  const EOT = 902;

  it('joins after a re-rendered answer, counts the drift, keeps sampled ids as sampled', () => {
    // Sampled [1, 2, EOT]; the server re-rendered that answer as [4, EOT] before the new context.
    const { traces, breaks } = loose.run([call('r1', 1, [900, 10], [1, 2, EOT]), call('r2', 2, [900, 10, 4, EOT, 903, 11], [3, EOT])]);
    expect(breaks).toEqual([]);
    expect(traces[0]).toMatchObject({
      request_ids: ['r1', 'r2'],
      response_ids: [1, 2, EOT, 903, 11, 3, EOT],
      loss_mask: [1, 1, 1, 0, 0, 1, 1],
      metadata: { allow_rerender: true, context_drift: 1 },
    });
  });

  it('an identical re-render is no drift; a length-cut answer keeps the end-of-turn token as context', () => {
    const same = loose.run([call('r1', 1, [900, 10], [1, 2, EOT]), call('r2', 2, [900, 10, 1, 2, EOT, 903], [3, EOT])]);
    expect(same.traces[0]!.metadata).toMatchObject({ context_drift: 0 });
    const cut = loose.run([
      call('r0', 0, [5], [6, EOT]),
      call('r1', 1, [900, 10], [1, 2], { finishReason: 'length' }),
      call('r2', 2, [900, 10, 4, EOT, 903], [3]),
    ]);
    const trace = cut.traces.find((t) => t.request_ids.includes('r1'))!;
    expect(trace.response_ids).toEqual([1, 2, EOT, 903, 3]);
    expect(trace.loss_mask).toEqual([1, 1, 0, 0, 1]);
  });

  it('history that changed before the previous answer still breaks', () => {
    const { breaks } = loose.run([call('r1', 1, [900, 10, 11], [1, EOT]), call('r2', 2, [900, 7, EOT, 903], [3])]);
    expect(breaks).toHaveLength(1);
  });
});
