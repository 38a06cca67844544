import { describe, expect, it } from 'vitest';
import type { CanonicalRequest } from '../core/chat.js';
import { estimatePromptTokens, normalizeRequest } from './normalize.js';

const req = (body: Record<string, unknown>): CanonicalRequest => ({
  requestedModel: 'm',
  stream: false,
  body: { messages: [{ role: 'user', content: 'hi' }], ...body } as CanonicalRequest['body'],
  client: { logprobs: false, tokenIds: false, includeUsage: false },
});

describe('normalizeRequest', () => {
  it('maps developer to system (Qwen3 drops roles it does not know)', () => {
    const out = normalizeRequest(
      req({
        messages: [
          { role: 'developer', content: 'rules' },
          { role: 'user', content: 'hi' },
        ],
      }),
      { contextWindow: null },
    );
    expect(out.body.messages.map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('renames max_completion_tokens to max_tokens', () => {
    expect(normalizeRequest(req({ max_completion_tokens: 100 }), { contextWindow: null }).body).toMatchObject({ max_tokens: 100 });
    expect(normalizeRequest(req({ max_completion_tokens: 100 }), { contextWindow: null }).body).not.toHaveProperty('max_completion_tokens');
  });

  it('drops a max_tokens that cannot fit the context, so the server gives what the context leaves', () => {
    expect(normalizeRequest(req({ max_tokens: 64_000 }), { contextWindow: 40_960 }).body).not.toHaveProperty('max_tokens');
    expect(normalizeRequest(req({ max_tokens: 1_000 }), { contextWindow: 40_960 }).body.max_tokens).toBe(1_000);
    // A long prompt leaves less room: 90,000 bytes estimates to 30,000 tokens.
    const long = [{ role: 'user', content: 'x'.repeat(90_000) }];
    expect(normalizeRequest(req({ messages: long, max_tokens: 20_000 }), { contextWindow: 40_960 }).body).not.toHaveProperty('max_tokens');
    expect(normalizeRequest(req({ max_tokens: 64_000 }), { contextWindow: null }).body.max_tokens).toBe(64_000);
  });

  it('names a max_tokens no server could take as sent (outOfRange), not one that only does not fit beside the prompt', () => {
    // Over the window itself: dropped, and named, so a trainer's record lists it.
    const huge = normalizeRequest(req({ max_tokens: 1e12 }), { contextWindow: 40_960 });
    expect(huge.body).not.toHaveProperty('max_tokens');
    expect(huge.outOfRange).toEqual(['max_tokens']);
    // Within the window but not beside this prompt: the usual harness budget, adapted silently.
    const long = [{ role: 'user', content: 'x'.repeat(90_000) }];
    const tight = normalizeRequest(req({ messages: long, max_tokens: 20_000 }), { contextWindow: 40_960 });
    expect(tight.body).not.toHaveProperty('max_tokens');
    expect(tight).not.toHaveProperty('outOfRange');
    // Under a cap, no budget at all (-1, 0, 1.5) is the cap, and named; before, -1 <= cap went upstream.
    for (const bad of [-1, 0, 1.5]) {
      const capped = normalizeRequest(req({ max_tokens: bad }), { contextWindow: null, maxTokens: 2048 });
      expect(capped.body.max_tokens, String(bad)).toBe(2048);
      expect(capped.outOfRange).toEqual(['max_tokens']);
    }
    expect(normalizeRequest(req({ max_tokens: 100 }), { contextWindow: 40_960, maxTokens: 2048 })).not.toHaveProperty('outOfRange');
  });

  it("caps max_tokens at a NeMo Gym row's max_output_tokens, sets it when the harness sent none, and near the context lowers it instead of dropping it", () => {
    expect(normalizeRequest(req({ max_tokens: 32_000 }), { contextWindow: null, maxTokens: 2048 }).body.max_tokens).toBe(2048);
    expect(normalizeRequest(req({}), { contextWindow: null, maxTokens: 2048 }).body.max_tokens).toBe(2048);
    expect(normalizeRequest(req({ max_completion_tokens: 100 }), { contextWindow: null, maxTokens: 2048 }).body.max_tokens).toBe(100);
    // 90,000 bytes estimate to 30,000 tokens: 10,960 are left of 40,960, under the cap's 20,000.
    const long = [{ role: 'user', content: 'x'.repeat(90_000) }];
    const near = normalizeRequest(req({ messages: long, max_tokens: 64_000 }), { contextWindow: 40_960, maxTokens: 20_000 }).body.max_tokens as number;
    expect(near).toBeLessThanOrEqual(20_000);
    expect(near + estimatePromptTokens(long)).toBeLessThanOrEqual(40_960);
    // No room by the estimate: the cap stays (NeMo-RL's server clamps it to the context itself).
    expect(normalizeRequest(req({ messages: long }), { contextWindow: 20_000, maxTokens: 512 }).body.max_tokens).toBe(512);
  });

  it('returns the request untouched when there is nothing to change', () => {
    const r = req({ max_tokens: 10 });
    expect(normalizeRequest(r, { contextWindow: 40_960 })).toBe(r);
  });

  it('estimates prompt tokens on the high side (bytes / 3)', () => {
    expect(estimatePromptTokens([{ role: 'user', content: 'abc' }])).toBe(Math.ceil(JSON.stringify([{ role: 'user', content: 'abc' }]).length / 3));
  });
});

describe('jsonLength', () => {
  it('is the UTF-8 byte length of JSON.stringify(value) for values without escapes, without serializing; the same read as bytes', async () => {
    const { jsonLength } = await import('./normalize.js');
    for (const v of [
      [],
      {},
      [1, 'a', null, true],
      { a: [{ b: 'café 日本語 🚀' }, 2.5], c: { d: null }, clé: 'x' },
      [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    ]) {
      const text = JSON.stringify(v);
      expect(jsonLength(v)).toBe(Buffer.byteLength(text));
      expect(jsonLength(JSON.parse(Buffer.from(text).toString('latin1')), true)).toBe(Buffer.byteLength(text));
    }
  });
});
