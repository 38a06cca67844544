import { describe, expect, it } from 'vitest';
import { parseJsonWithIdArrays } from './id-arrays.js';

const ids = (n: number, seed = 7) => Array.from({ length: n }, (_, i) => (i * 2654435761 + seed) % 151_936);

describe('reading prompt id arrays without the generic parser', () => {
  it('gives exactly what JSON.parse gives, top-level and nested, with the rest of the reply intact', () => {
    const reply = {
      id: 'chatcmpl-1',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'café "prompt_token_ids":[1,2] 日本語', prompt_token_ids: ids(3000, 1) }, token_ids: [1, 2, 3] },
      ],
      usage: { prompt_tokens: 5000 },
      prompt_token_ids: ids(5000),
      kv_transfer_params: null,
    };
    for (const text of [JSON.stringify(reply), JSON.stringify(reply, null, 1)]) {
      const expected = JSON.parse(text);
      // As bytes (a whole reply), and as text (an ASCII stream event; a non-ASCII one parses generically).
      for (const input of [Buffer.from(text), text, text.replace(/[^\x00-\x7f]/g, '?')]) {
        const got = parseJsonWithIdArrays(input) as typeof reply;
        const want = typeof input === 'string' && input !== text ? JSON.parse(input) : expected;
        expect(JSON.parse(JSON.stringify(got, (_k, v) => (v instanceof Uint32Array ? Array.from(v) : v)))).toEqual(want);
      }
    }
    // The big arrays come back as Uint32Arrays with the same values.
    const got = parseJsonWithIdArrays(Buffer.from(JSON.stringify(reply))) as typeof reply;
    expect(got.prompt_token_ids).toBeInstanceOf(Uint32Array);
    expect(Array.from(got.prompt_token_ids as unknown as Uint32Array)).toEqual(reply.prompt_token_ids);
  });

  it('falls back to JSON.parse for anything but plain uint32 literals, so errors and odd values are JSON.parse’s', () => {
    const pad = ' '.repeat(9000);
    for (const bad of ['[1,2.5]', '[1,-2]', '[01]', '[1,,2]', '[1,]', '[4294967296]', '["1"]', '[1e3]']) {
      const text = `{"prompt_token_ids":${bad},"pad":"${pad}"}`;
      let expected: unknown;
      try {
        expected = JSON.parse(text);
      } catch (err) {
        expect(() => parseJsonWithIdArrays(Buffer.from(text))).toThrow((err as Error).message);
        continue;
      }
      expect(parseJsonWithIdArrays(Buffer.from(text))).toEqual(expected);
    }
    expect(parseJsonWithIdArrays(Buffer.from(`{"prompt_token_ids":[],"pad":"${pad}"}`))).toEqual({ prompt_token_ids: new Uint32Array(0), pad });
    expect(() => parseJsonWithIdArrays(Buffer.from(`{"prompt_token_ids":[1,2],"pad":"${pad}"`))).toThrow();
  });

  it('a key inside a string is text, not an array to read', () => {
    const text = JSON.stringify({ content: `x\\"prompt_token_ids":[1,2,3] ${'y'.repeat(9000)}`, prompt_token_ids: [5, 6] });
    expect(parseJsonWithIdArrays(Buffer.from(text))).toEqual({ ...JSON.parse(text), prompt_token_ids: new Uint32Array([5, 6]) });
  });
});
