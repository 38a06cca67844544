/** The typed arrays the read path grows as it appends (ids, masks, logprobs, offsets). */
type Growable = Uint8Array | Int32Array | Uint32Array | Float64Array;

/**
 * A typed array of the same kind with room for at least `need` values (half as much again, so a
 * run of appends copies each value a bounded number of times), holding the first `keep` of `old`'s.
 */
export function grown<T extends Growable>(old: T, need: number, keep: number): T {
  const next = new (old.constructor as new (n: number) => T)(Math.ceil(need * 1.5) + 16);
  next.set(old.subarray(0, keep));
  return next;
}
