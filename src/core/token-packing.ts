/**
 * Token columns are packed little-endian so a row reads the same on any machine:
 * ids as uint32 (vocabularies fit easily), logprobs as float64 so the exact double the
 * server sent survives (a float32 column would round it).
 */

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

export function unpackUint32(blob: Uint8Array | null | undefined): number[] | null {
  if (!blob) return null;
  if (blob.byteLength % 4 !== 0) throw new RangeError(`uint32 blob has ${blob.byteLength} bytes, not a multiple of 4`);
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const out = new Array<number>(blob.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getUint32(i * 4, true);
  return out;
}

export function packFloat64(values: readonly number[]): Buffer {
  const buf = Buffer.allocUnsafe(values.length * 8);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < values.length; i++) view.setFloat64(i * 8, values[i]!, true);
  return buf;
}

export function unpackFloat64(blob: Uint8Array | null | undefined): number[] | null {
  if (!blob) return null;
  if (blob.byteLength % 8 !== 0) throw new RangeError(`float64 blob has ${blob.byteLength} bytes, not a multiple of 8`);
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const out = new Array<number>(blob.byteLength / 8);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat64(i * 8, true);
  return out;
}
