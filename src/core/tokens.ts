/**
 * What a call's token data is and where it came from. `upstream`: the inference server returned
 * the ids it saw and sampled. `none`: it did not (an OpenAI-compatible server without token ids);
 * such a call keeps its text but is never trainable. polar never re-tokenizes text to fill ids in.
 */
export type TokenSource = 'upstream' | 'none';

/**
 * Token ids as captured: a JS array, or (for prompts read straight from a reply, tens of thousands
 * of ids) a Uint32Array, which costs a third of the time to build and stores without copying.
 */
export type TokenIds = readonly number[] | Uint32Array;

/** Ids as a JSON-ready array (a typed array would serialize as an object). */
export function idList(ids: TokenIds): readonly number[] {
  return Array.isArray(ids) ? ids : numberArray(ids as Uint32Array);
}

function uint32Bytes(a: Uint32Array, from: number, n: number): Buffer {
  return Buffer.from(a.buffer, a.byteOffset + from * 4, n * 4);
}

/**
 * Whether `a[aFrom, aFrom + n)` and `b[bFrom, bFrom + n)` hold the same ids (both ranges inside
 * their arrays). Between typed arrays, one native comparison of their bytes (memcmp): equal uint32
 * bytes are equal ids.
 */
export function sameIds(a: ArrayLike<number>, aFrom: number, b: ArrayLike<number>, bFrom: number, n: number): boolean {
  if (n <= 0) return true;
  if (a instanceof Uint32Array && b instanceof Uint32Array) return uint32Bytes(a, aFrom, n).equals(uint32Bytes(b, bFrom, n));
  for (let i = 0; i < n; i++) if (a[aFrom + i] !== b[bFrom + i]) return false;
  return true;
}

/** The length of the common start of two id sequences; between typed arrays, found block by block natively. */
export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>): number {
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

/**
 * A copy as a JS array, every value as stored (a Float64Array's doubles to the last bit): what a
 * Trajectory or a row's JS form holds, since a typed array serialises as an object.
 */
export function numberArray<T extends number = number>(values: ArrayLike<T>): T[] {
  const out = new Array<T>(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i]!;
  return out;
}

export interface CapturedTokens {
  source: TokenSource;
  promptIds: TokenIds | null;
  sampledIds: number[] | null;
  /** One float64 per sampled id: the logprob the server reported for it. */
  logprobs: number[] | null;
}

/** Token data carried by one streamed chunk. */
export interface TokenDelta {
  promptIds?: TokenIds;
  sampledIds?: number[];
  logprobs?: number[];
}

export const NO_TOKENS: CapturedTokens = Object.freeze({
  source: 'none',
  promptIds: null,
  sampledIds: null,
  logprobs: null,
}) as CapturedTokens;

export interface UsageCounts {
  promptTokens?: number;
  completionTokens?: number;
}

/**
 * Disagreements inside a call's token data, in words. Nothing is fixed up: the ids and logprobs
 * are stored exactly as received and these problems are stored beside them.
 */
export function tokenProblems(tokens: CapturedTokens, usage?: UsageCounts): string[] {
  const problems: string[] = [];
  if (tokens.source !== 'upstream') return problems;
  const { promptIds, sampledIds, logprobs } = tokens;
  if (!promptIds) problems.push('upstream returned no prompt token ids');
  if (!sampledIds) problems.push('upstream returned no sampled token ids');
  if (!logprobs) problems.push('upstream returned no logprobs');
  if (sampledIds && logprobs && sampledIds.length !== logprobs.length) {
    problems.push(`${sampledIds.length} sampled ids but ${logprobs.length} logprobs`);
  }
  if (usage?.promptTokens !== undefined && promptIds && usage.promptTokens !== promptIds.length) {
    problems.push(`usage.prompt_tokens is ${usage.promptTokens} but ${promptIds.length} prompt ids`);
  }
  if (usage?.completionTokens !== undefined && sampledIds && usage.completionTokens !== sampledIds.length) {
    problems.push(`usage.completion_tokens is ${usage.completionTokens} but ${sampledIds.length} sampled ids`);
  }
  if (logprobs) {
    const bad = logprobs.findIndex((lp) => !Number.isFinite(lp) || lp > 0);
    if (bad >= 0) problems.push(`logprob at position ${bad} is ${logprobs[bad]}, not a finite value <= 0`);
  }
  return problems;
}
