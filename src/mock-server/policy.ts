/**
 * The mock model's "policy": the logprob it gives a token is a fixed function of the token and
 * every token before it (a rolling hash of the context), so the logprobs it reports while sampling
 * and the prompt logprobs it reports when asked to score the same ids later (vLLM `prompt_logprobs`,
 * SGLang `logprob_start_len`) are bit-identical: re-scoring a recording against the same mock gives
 * Δ = 0. Values use the full float64 mantissa (a float32 store would be caught), are finite and < 0.
 * `shift` plants a known difference for tests: `delta` is added at every position divisible by
 * `every`, as a second policy that disagrees with the first exactly there.
 */
export interface PolicyShift {
  every: number;
  delta: number;
}

export function policyLogprobs(context: readonly number[], tokens: readonly number[], shift?: PolicyShift): number[] {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  const mix = (id: number) => {
    h1 = Math.imul(h1 ^ id, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ (id + 0x9e3779b9), 0x85ebca6b) >>> 0;
    h2 ^= h2 >>> 13;
  };
  for (const id of context) mix(id);
  const out = new Array<number>(tokens.length);
  tokens.forEach((id, i) => {
    const a = Math.imul(h1 ^ id, 0x27d4eb2d) >>> 0;
    const b = Math.imul(h2 ^ (id * 2654435761), 0x165667b1) >>> 0;
    // 53 bits from two 32-bit hashes: a uniform double in [0, 1) with every mantissa bit used.
    const u = ((a >>> 5) * 67108864 + (b >>> 6)) / 9007199254740992;
    let lp = -(u * 6 + 1e-9);
    const position = context.length + i;
    if (shift && position % shift.every === 0) lp -= shift.delta;
    out[i] = lp;
    mix(id);
  });
  return out;
}
