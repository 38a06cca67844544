import { describe, expect, it } from 'vitest';
import type { CallTokenRow } from '../store/requests.js';
import { compareFirstPrompts, sampleFirstPrompt, splitMessage } from './first-prompts.js';

const call = (seq: number, promptIds: number[] | null, extra: Partial<CallTokenRow> = {}): CallTokenRow =>
  ({
    id: `c${seq}`,
    agentId: 'main',
    seq,
    status: 'ok',
    tokenSource: promptIds ? 'upstream' : 'none',
    promptIds,
    sampledIds: promptIds ? [9] : null,
    logprobs: promptIds ? [-0.1] : null,
    tokenDigest: null,
    finishReason: 'stop',
    usage: null,
    toolCount: 1,
    render: null,
    policyVersion: null,
    ...extra,
  }) as CallTokenRow;

describe('sampleFirstPrompt: the first prompt NeMo-RL would group the sample by', () => {
  it("is the main agent's first call with server ids and tools, past side calls, failed calls and sub-agents", () => {
    const rows = [
      call(1, [7, 7], { toolCount: 0 }), // a side call (title request): never in the trace
      call(2, [1, 2], { status: 'error' }),
      call(3, [5, 5], { agentId: 'sub-1' }),
      call(4, [1, 2, 3]),
      call(5, [1, 2, 3, 9, 4]),
    ];
    expect(sampleFirstPrompt(rows)).toEqual({ ids: [1, 2, 3], requestId: 'c4' });
  });

  it('says why a sample cannot be compared: no calls, or no ids from the upstream (never re-tokenized)', () => {
    expect(sampleFirstPrompt([])).toEqual({ unchecked: 'no model call recorded' });
    expect(sampleFirstPrompt([call(1, null)])).toEqual({ unchecked: 'the upstream returned no token ids (token_source none)' });
  });
});

describe('compareFirstPrompts', () => {
  it('a group sharing one first prompt is one NeMo-RL group', () => {
    const c = compareFirstPrompts([{ ids: [1, 2, 3] }, { ids: [1, 2, 3] }, { ids: [1, 2, 3] }, { ids: [1, 2, 3] }]);
    expect(c).toMatchObject({ status: 'same', checked: 4, distinct: 1, prompt: [0, 0, 0, 0], differsAt: null });
  });

  it('a split group: how many first prompts, which sample has which, where the first two part', () => {
    const c = compareFirstPrompts([{ ids: [1, 2, 3, 4] }, { unchecked: 'no model call recorded' }, { ids: [1, 2, 8, 4, 5] }, { ids: [1, 2, 3, 4] }]);
    expect(c).toEqual({
      status: 'split',
      checked: 3,
      distinct: 2,
      prompt: [0, null, 1, 0],
      differsAt: { samples: [0, 2], token: 2, lengths: [4, 5] },
      unchecked: [{ sample: 1, reason: 'no model call recorded' }],
    });
    expect(splitMessage('t1', c)).toMatch(
      /^task t1: its samples have 2 different first prompts \(samples 0 and 2 part at token 2; lengths 4 and 5\)\. NeMo-RL groups/,
    );
  });

  it('fewer than two comparable samples: unchecked, not "same"', () => {
    expect(compareFirstPrompts([{ ids: [1] }, { unchecked: 'x' }]).status).toBe('unchecked');
    // A prompt that is a prefix of another still differs (NeMo-RL pads, it does not truncate).
    expect(compareFirstPrompts([{ ids: [1, 2] }, { ids: [1, 2, 3] }]).differsAt).toEqual({ samples: [0, 1], token: 2, lengths: [2, 3] });
  });
});
