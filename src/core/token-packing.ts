/**
 * Token columns are packed little-endian so a row reads the same on any machine:
 * ids as uint32 (vocabularies fit easily), logprobs as float64 so the exact double the
 * server sent survives (a float32 column would round it).
 */

import { numberArray } from './tokens.js';

/** Whether typed arrays here hold their values in the stored byte order (little-endian), so a BLOB can be viewed as one. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

export function packUint32(ids: ArrayLike<number>): Buffer {
  // A Uint32Array is already this layout on a little-endian machine: its bytes, without a copy.
  if (ids instanceof Uint32Array && LITTLE_ENDIAN) return Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength);
  const buf = Buffer.allocUnsafe(ids.length * 4);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) {
      throw new RangeError(`token id at position ${i} is not a uint32: ${id}`);
    }
    view.setUint32(i * 4, id, true);
  }
  return buf;
}

/** A uint32 column as a JS array (a copy); uint32View where a typed array will do. */
export function unpackUint32(blob: Uint8Array | null | undefined): number[] | null {
  const ids = uint32View(blob);
  return ids && numberArray(ids);
}

export function packFloat64(values: ArrayLike<number>): Buffer {
  if (values instanceof Float64Array && LITTLE_ENDIAN) return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  const buf = Buffer.allocUnsafe(values.length * 8);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < values.length; i++) view.setFloat64(i * 8, values[i]!, true);
  return buf;
}

/** A float64 column as a JS array (a copy); float64View where a typed array will do. */
export function unpackFloat64(blob: Uint8Array | null | undefined): number[] | null {
  const values = float64View(blob);
  return values && numberArray(values);
}
/**
 * A uint32 column (little-endian, token-packing.ts) as a Uint32Array: a view of the BLOB's own bytes
 * where the machine is little-endian and they are aligned, otherwise a decoded copy.
 */
export function uint32View(blob: Uint8Array | null | undefined): Uint32Array | null {
  if (!blob) return null;
  if (blob.byteLength % 4 !== 0) throw new RangeError(`uint32 blob has ${blob.byteLength} bytes, not a multiple of 4`);
  const n = blob.byteLength / 4;
  if (LITTLE_ENDIAN && blob.byteOffset % 4 === 0) return new Uint32Array(blob.buffer, blob.byteOffset, n);
  const out = new Uint32Array(n);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(blob);
  else {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    for (let i = 0; i < n; i++) out[i] = view.getUint32(i * 4, true);
  }
  return out;
}

/** A float64 column (little-endian, every bit as the server sent it) as a Float64Array, viewed in place where it can be. */
export function float64View(blob: Uint8Array | null | undefined): Float64Array | null {
  if (!blob) return null;
  if (blob.byteLength % 8 !== 0) throw new RangeError(`float64 blob has ${blob.byteLength} bytes, not a multiple of 8`);
  const n = blob.byteLength / 8;
  if (LITTLE_ENDIAN && blob.byteOffset % 8 === 0) return new Float64Array(blob.buffer, blob.byteOffset, n);
  const out = new Float64Array(n);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(blob);
  else {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    for (let i = 0; i < n; i++) out[i] = view.getFloat64(i * 8, true);
  }
  return out;
}
