import { describe, expect, it } from 'vitest';
import { float64View, packFloat64, packUint32, uint32View, unpackFloat64, unpackUint32 } from './token-packing.js';

describe('token blobs', () => {
  it('packs ids as little-endian uint32', () => {
    const blob = packUint32([1, 151645, 0xffffffff]);
    expect([...blob]).toEqual([1, 0, 0, 0, 0x5d, 0x50, 0x02, 0x00, 0xff, 0xff, 0xff, 0xff]);
    expect(unpackUint32(blob)).toEqual([1, 151645, 0xffffffff]);
  });

  it('refuses values that are not uint32 instead of wrapping them', () => {
    expect(() => packUint32([-1])).toThrow(RangeError);
    expect(() => packUint32([1.5])).toThrow(RangeError);
    expect(() => packUint32([2 ** 32])).toThrow(RangeError);
  });

  it('packs logprobs as little-endian float64, bit for bit', () => {
    // biome-ignore lint/correctness/noPrecisionLoss: a literal with more digits than a float64 holds is the point of a bit-for-bit test
    const values = [-0.123456789012345678, -9999, -1e-300, Number.NEGATIVE_INFINITY, -5e-324];
    const blob = packFloat64(values);
    expect(blob.length).toBe(40);
    expect(blob.readDoubleLE(0)).toBe(values[0]);
    expect(unpackFloat64(blob)).toEqual(values);
    expect(Object.is(unpackFloat64(packFloat64([Number.NaN]))![0], Number.NaN)).toBe(true);
  });

  it('reads blobs at a non-zero byte offset (better-sqlite3 may hand out views)', () => {
    const backing = Buffer.alloc(12);
    backing.writeUInt32LE(42, 4);
    backing.writeUInt32LE(7, 8);
    expect(unpackUint32(backing.subarray(4))).toEqual([42, 7]);
  });

  it('rejects truncated blobs and passes null through', () => {
    expect(() => unpackUint32(Buffer.alloc(5))).toThrow(RangeError);
    expect(() => unpackFloat64(Buffer.alloc(12))).toThrow(RangeError);
    expect(unpackUint32(null)).toBeNull();
  });
});

describe('typed views of stored columns', () => {
  it('read every bit, aligned or not', () => {
    const ids = [0, 1, 0xffffffff, 151_000];
    const lps = [-0.1, -0, -1e-300, Number.MIN_VALUE * -1, -(2 ** -1074), -0.30000000000000004];
    const misaligned = (b: Buffer) => {
      const spare = Buffer.alloc(b.length + 1);
      b.copy(spare, 1);
      return spare.subarray(1);
    };
    for (const make of [(b: Buffer) => b, misaligned]) {
      expect([...uint32View(make(packUint32(ids)))!]).toEqual(ids);
      const back = [...float64View(make(packFloat64(lps)))!];
      back.forEach((x, i) => expect(Object.is(x, lps[i])).toBe(true));
    }
    expect(uint32View(null)).toBeNull();
    // A typed array in the stored layout is packed as its own bytes, and reads back the same.
    const typed = Float64Array.from(lps);
    expect(packFloat64(typed).equals(packFloat64(lps))).toBe(true);
    expect(packUint32(Uint32Array.from(ids)).equals(packUint32(ids))).toBe(true);
    expect(() => uint32View(Buffer.alloc(6))).toThrow(/not a multiple of 4/);
  });
});
