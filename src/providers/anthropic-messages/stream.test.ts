import { describe, expect, it } from 'vitest';
import type { StreamEvent } from '../stream-step.js';
import { createAnthropicStream } from './stream.js';

const REQ = { requestedModel: 'claude-sonnet-4', client: { logprobs: false, tokenIds: false, includeUsage: false }, codecState: undefined };

/** Texts JSON escapes differently: quotes, backslashes, control characters, non-ASCII, emoji, lone surrogates, U+2028. */
const TEXTS = ['plain', ' "quoted" \\ back', 'line\nbreak\ttab\u0000nul\u001f', 'café 日本語', '🚀', '\ud800 lone', '\u2028\u2029', ''];

function deltas(kind: 'text' | 'reasoning'): string[] {
  const stream = createAnthropicStream(REQ, { callId: 'c1', created: 1 });
  const events: StreamEvent[] = TEXTS.filter((t) => t.length > 0).map((text) => ({ kind, text }));
  return stream
    .push({
      chunk: { id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [] },
      tokens: null,
      events,
      counts: { promptTokens: 1, completionTokens: 0 },
    })
    .filter((e) => e.event === 'content_block_delta')
    .map((e) => e.data);
}

describe('Anthropic stream deltas', () => {
  it('writes each text and thinking delta as exactly the JSON of its event object', () => {
    const texts = TEXTS.filter((t) => t.length > 0);
    expect(deltas('text')).toEqual(texts.map((text) => JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })));
    expect(deltas('reasoning')).toEqual(
      texts.map((thinking) => JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking } })),
    );
  });
});
