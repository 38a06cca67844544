/**
 * The read side of prompt deltas (delta.ts) for a whole session at once, as typed arrays: what
 * `reconstruct` and `verify-faithfulness` read, every call of every session.
 *
 * A row's prompt is the first `prompt_base_len` tokens of its base call's prompt + sampled ids, then
 * its own stored suffix. Rebuilding each prompt as a fresh array (the base's tokens copied, then the
 * suffix) costs O(n²) copies in a session of n calls — every prompt copied whole — where the store
 * holds O(n). Here each chain of deltas is materialised once, in order, into one growing buffer:
 * a call that takes its base's whole sequence (the agent's next turn, the common case) appends its
 * suffix and sampled ids in place, and its prompt is a view of that buffer's start. A call that takes
 * less than the whole (a branch: a retry, a rewritten history, two calls on one base) starts a buffer
 * of its own, copying only the part it takes, so no view ever changes under its holder. Stored BLOBs
 * are viewed in place, not unpacked element by element.
 */

import { grown } from '../core/grown.js';
import { uint32View } from '../core/token-packing.js';

/** A row's token columns as stored. */
export interface StoredTokens {
  id: string;
  prompt_ids: Uint8Array | null;
  prompt_base: string | null;
  prompt_base_len: number | null;
  sampled_ids: Uint8Array | null;
}

export interface ResolvedTokens {
  promptIds: Uint32Array | null;
  sampledIds: Uint32Array | null;
}

/**
 * One chain's tokens. Positions below `length` are never written again (views of them are held by
 * the calls read so far); when the buffer is outgrown, a larger one takes over and the old one
 * stays as it is for the views into it.
 */
interface Run {
  buf: Uint32Array;
  length: number;
}

/** Where a resolved call's prompt + sampled ids lie: the first `length` tokens of `run`. */
interface Sequence {
  run: Run;
  length: number;
}

/**
 * Each row's whole prompt ids and its sampled ids, rows given in sequence order. A base is normally
 * an earlier row of the same rows; a call can end before an earlier-started one and become its base,
 * so a base later in the order is resolved first. A base not among the rows (a reference out of the
 * session) is asked of `outside`: its prompt + sampled ids.
 */
export function resolvePrompts(rows: readonly StoredTokens[], outside: (id: string) => Uint32Array): ResolvedTokens[] {
  const at = new Map<string, number>();
  rows.forEach((r, i) => at.set(r.id, i));
  const out: ResolvedTokens[] = new Array(rows.length);
  const sequences: (Sequence | undefined)[] = new Array(rows.length);
  const pending = new Set<number>();
  const resolveOne = (i: number): void => {
    const r = rows[i]!;
    const stored = uint32View(r.prompt_ids);
    const sampled = uint32View(r.sampled_ids);
    if (!r.prompt_base || r.prompt_base_len === null) {
      out[i] = { promptIds: stored, sampledIds: sampled };
      sequences[i] = fresh(stored, stored?.length ?? 0, sampled, 0);
      return;
    }
    const b = at.get(r.prompt_base);
    const base: Sequence = b !== undefined ? sequences[b]! : whole(outside(r.prompt_base));
    const take = r.prompt_base_len;
    if (base.length < take) throw new RangeError(`call ${r.prompt_base} holds ${base.length} tokens, fewer than the ${take} a later call takes from it`);
    const suffix = stored?.length ?? 0;
    let run: Run;
    if (base.run.length === base.length && take === base.length) {
      // The base is its chain's tip and this call takes all of it: grow the chain in place.
      run = base.run;
      reserve(run, suffix + (sampled?.length ?? 0));
    } else run = fresh(base.run.buf, take, null, suffix + (sampled?.length ?? 0)).run;
    if (stored) run.buf.set(stored, run.length);
    run.length += suffix;
    const promptIds = run.buf.subarray(0, run.length);
    if (sampled) run.buf.set(sampled, run.length);
    run.length += sampled?.length ?? 0;
    out[i] = { promptIds, sampledIds: sampled };
    sequences[i] = { run, length: run.length };
  };
  for (let i = 0; i < rows.length; i++) {
    // Bases first: walk back to the first unresolved link, then resolve forward.
    const chain: number[] = [];
    for (let k: number | undefined = i; k !== undefined && sequences[k] === undefined; ) {
      if (pending.has(k)) throw new RangeError(`call ${rows[k]!.id}'s prompt is stored against a chain of calls that leads back to itself`);
      pending.add(k);
      chain.push(k);
      const base: string | null = rows[k]!.prompt_base_len !== null ? rows[k]!.prompt_base : null;
      k = base ? at.get(base) : undefined;
    }
    for (let j = chain.length - 1; j >= 0; j--) {
      resolveOne(chain[j]!);
      pending.delete(chain[j]!);
    }
  }
  return out;
}

/** A new chain holding `head`'s first `take` tokens, then `tail`, with room for `more` tokens after and a quarter spare. */
function fresh(head: Uint32Array | null, take: number, tail: Uint32Array | null, more: number): Sequence {
  const n = take + (tail?.length ?? 0);
  const run: Run = { buf: new Uint32Array(Math.ceil((n + more) * 1.25) + 16), length: take };
  if (head) run.buf.set(head.subarray(0, take));
  if (tail) run.buf.set(tail, take);
  run.length = n;
  return { run, length: n };
}

/** A sequence read from elsewhere, as a chain of its own (copied when a call extends it). */
function whole(ids: Uint32Array): Sequence {
  return { run: { buf: ids, length: ids.length }, length: ids.length };
}

/** Room for `more` tokens after the chain's end (core/grown.ts when outgrown). */
function reserve(run: Run, more: number): void {
  const need = run.length + more;
  if (need > run.buf.length) run.buf = grown(run.buf, need, run.length);
}
