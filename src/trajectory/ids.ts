import type { TokenIds } from '../core/tokens.js';

/**
 * Token ids and logprobs as the trajectory code reads them: JS arrays (tests, traces read back from
 * JSONL) or typed arrays (the store's, store/delta-read.ts). Comparisons between typed arrays run
 * over their bytes natively (memcmp): equal uint32 bytes are equal ids, and equal float64 bytes are
 * the same logprob to the last bit, which is the check verification makes anyway.
 */
export type Logprobs = readonly number[] | Float64Array;

function bytesOf(a: Uint32Array, from: number, n: number): Buffer {
  return Buffer.from(a.buffer, a.byteOffset + from * 4, n * 4);
}

/**
 * Whether `a[aFrom, aFrom + n)` and `b[bFrom, bFrom + n)` hold the same ids (both ranges inside
 * their arrays). Between typed arrays, one native comparison of their bytes.
 */
export function sameIds(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, n: number): boolean {
  if (n <= 0) return true;
  if (a instanceof Uint32Array && b instanceof Uint32Array) return bytesOf(a, aFrom, n).equals(bytesOf(b, bFrom, n));
  for (let i = 0; i < n; i++) if (a[aFrom + i] !== b[bFrom + i]) return false;
  return true;
}

/** The length of the common start of two id sequences; between typed arrays, found block by block natively. */
export function commonIdPrefix(a: TokenIds, b: TokenIds): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  if (a instanceof Uint32Array && b instanceof Uint32Array) {
    for (let block = 4096; block >= 64; block >>= 4) {
      while (i + block <= n && sameIds(a, i, b, i, block)) i += block;
    }
  }
  while (i < n && a[i] === b[i]) i++;
  return i;
}
