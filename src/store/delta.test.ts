import { describe, expect, it } from 'vitest';
import { applyStringDelta, commonPrefixLength, MIN_SHARED_CHARS, stringDelta } from './delta.js';

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
