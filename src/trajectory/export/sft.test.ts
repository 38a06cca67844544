import { describe, expect, it } from 'vitest';
import { chatFields } from './sft.js';

describe('chatFields', () => {
  it('keeps what a chat template reads and drops what an upstream request carried for the server', () => {
    const pinned = {
      role: 'assistant',
      content: '',
      reasoning_content: 'think',
      reasoning: 'think',
      tool_calls: [{ id: 'c1', type: 'function' as const, index: 0, function: { name: 'ls', arguments: '{"path":"."}' } }],
      prompt_token_ids: [1, 2],
      generation_token_ids: [3],
      generation_log_probs: [-0.1],
    };
    expect(chatFields(pinned)).toEqual({
      role: 'assistant',
      content: '',
      reasoning_content: 'think',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ls', arguments: '{"path":"."}' } }],
    });
    expect(chatFields({ role: 'tool', tool_call_id: 'c1', name: 'ls', content: 'a.ts' })).toEqual({
      role: 'tool',
      tool_call_id: 'c1',
      name: 'ls',
      content: 'a.ts',
    });
  });

  it("takes the reasoning from vLLM's `reasoning` when that is the only copy, and leaves empty reasoning out", () => {
    expect(chatFields({ role: 'assistant', content: 'hi', reasoning: 'r' })).toEqual({ role: 'assistant', content: 'hi', reasoning_content: 'r' });
    expect(chatFields({ role: 'assistant', content: 'hi', reasoning_content: '' })).toEqual({ role: 'assistant', content: 'hi' });
  });
});
