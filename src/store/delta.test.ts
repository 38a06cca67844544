import { describe, expect, it } from 'vitest';
import { commonPrefixLength } from '../core/tokens.js';
import { applyStringDelta, byteDelta, MIN_SHARED_CHARS, stringDelta } from './delta.js';

describe('deltas', () => {
  it('a grown body is its base’s ends around the new middle', () => {
    const head = `{"messages":[${'{"role":"user","content":"café 日本語"},'.repeat(40)}`;
    const tail = `],"tools":[${'{"name":"bash"},'.repeat(40)}{}],"stream":true}`;
    const base = `${head}{"role":"user","content":"one"}${tail}`;
    const text = `${head}{"role":"user","content":"one"},{"role":"assistant","content":"two 🚀"}${tail}`;
    const d = stringDelta(base, text)!;
    expect(d.middle).toBe(',{"role":"assistant","content":"two 🚀"}');
    expect(applyStringDelta(base, d)).toBe(text);
  });

  it('never splits a surrogate pair, so every part stores as valid UTF-8', () => {
    const pad = 'x'.repeat(MIN_SHARED_CHARS);
    // The two texts share the high surrogate of different emoji: the boundary moves before it.
    const base = `${pad}😀${pad}`;
    const text = `${pad}😁${pad}`;
    const d = stringDelta(base, text)!;
    expect(d.middle).toBe('😁');
    expect(applyStringDelta(base, d)).toBe(text);
    // And at the end: shared low surrogates of different high ones.
    const a = `${pad}\ud83d\ude00${pad}`;
    const b = `${pad}\ud83e\ude00${pad}`;
    expect(stringDelta(a, b)!.middle).toBe('\ud83e\ude00');
  });

  it('texts that share little are stored whole; a base too short for a delta is refused', () => {
    expect(stringDelta('abc', 'abd')).toBeNull();
    expect(() => applyStringDelta('short', { prefix: 4, suffix: 4, middle: '' })).toThrow(RangeError);
    expect(commonPrefixLength(new Uint32Array([1, 2, 3]), [1, 2, 4])).toBe(2);
  });
});

describe('byteDelta', () => {
  const NON_ASCII = ' — café, naïve, 日本語, 🚀, à\u00a0';
  /** The delta of `text` against `base`, made from their UTF-8 bytes and read back as text. */
  function roundTrip(base: string, text: string) {
    const d = byteDelta(Buffer.from(base), base.length, Buffer.from(text))!;
    expect(d).not.toBeNull();
    const middle = d.middle.toString('utf8');
    expect(Buffer.from(middle, 'utf8').equals(d.middle)).toBe(true); // whole characters
    expect(applyStringDelta(base, { prefix: d.prefix, suffix: d.suffix, middle })).toBe(text);
    expect(d.units).toBe(text.length);
    return { ...d, middle };
  }

  it('reads back with applyStringDelta as the text, cut only between characters', () => {
    const base = JSON.stringify({ messages: Array.from({ length: 30 }, (_, i) => ({ role: 'user', content: `tour ${i}${NON_ASCII}` })), tail: 'fin 🚀' });
    const edits = [
      (s: string) => s.replace('"tail"', `{"role":"tool","content":"nouveau — 日本"},"tail"`),
      (s: string) => s.replace('🚀"}', '🚁"}'), // shares the emoji's first three bytes
      (s: string) => s.replace('café', 'cafè'), // shares the first byte of é/è
      (s: string) => `${s.slice(0, -2)}é"}`,
    ];
    for (const edit of edits) roundTrip(base, edit(base));
  });

  it('finds long shared ends exactly, whatever block an edit falls in', () => {
    // ~60 KB ends: the block comparisons (4096, 256, 64 bytes) carry most of the span, and the
    // edit lands at every offset within a block, and right at the body's ends.
    const messages = Array.from({ length: 400 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `tour ${i}${NON_ASCII}` }));
    const base = JSON.stringify({ model: 'm', messages, tools: messages.slice(0, 200) });
    for (const at of [0, 1, 63, 64, 65, 255, 4095, 4096, 4097, 30_001, base.length - 70, base.length - 1, base.length]) {
      const text = `${base.slice(0, at)},"nouveau — 日本 🚀"${base.slice(at)}`;
      const d = roundTrip(base, text);
      if (at > MIN_SHARED_CHARS && at < base.length - 64) expect(d.middle).toBe(',"nouveau — 日本 🚀"');
    }
  });

  it('stops at a single changed byte, wherever it sits in a block', () => {
    // ASCII, so character and byte offsets agree: a change in the last or first byte of a block is
    // missed by a comparison that is one byte short.
    const base = 'abcdefghij'.repeat(2000);
    for (const at of [
      0,
      63,
      64,
      255,
      256,
      4095,
      4096,
      8191,
      12_287,
      base.length - 4097,
      base.length - 4096,
      base.length - 257,
      base.length - 64,
      base.length - 1,
    ]) {
      const text = `${base.slice(0, at)}#${base.slice(at + 1)}`;
      expect(roundTrip(base, text).middle, `at ${at}`).toBe('#');
    }
  });

  it('is null when the bodies share less than the minimum', () => {
    expect(byteDelta(Buffer.from('a'.repeat(100)), 100, Buffer.from('b'.repeat(100)))).toBeNull();
  });
});
