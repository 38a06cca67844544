import { describe, expect, it } from 'vitest';
import { packFloat64, packUint32, unpackFloat64, unpackUint32 } from './token-packing.js';

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
