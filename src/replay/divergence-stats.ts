/**
 * How far a second policy's logprobs of the recorded tokens are from the logprobs recorded when they
 * were sampled (pure). Per token, Δ = rescored − recorded. The KL estimates are of KL(recorded ‖
 * rescored) from the recorded policy's own samples: k1 = mean(recorded − rescored) (unbiased, can be
 * negative on few tokens), k3 = mean(r − 1 − log r) with r = exp(rescored − recorded) (unbiased and
 * never negative; Schulman's "Approximating KL divergence").
 */
export interface LogprobComparison {
  tokens: number;
  meanAbsDelta: number;
  maxAbsDelta: number;
  klK1: number;
  klK3: number;
  /** The largest |Δ|, largest first. */
  worst: { position: number; tokenId: number; recorded: number; rescored: number; delta: number; text?: string }[];
}

export function compareLogprobs(
  sampledIds: readonly number[],
  recorded: readonly number[],
  rescored: readonly number[],
  decode?: (id: number) => string,
  worstN = 3,
): LogprobComparison {
  const n = sampledIds.length;
  let abs = 0;
  let max = 0;
  let k1 = 0;
  let k3 = 0;
  const deltas: LogprobComparison['worst'] = [];
  for (let i = 0; i < n; i++) {
    const d = rescored[i]! - recorded[i]!;
    abs += Math.abs(d);
    max = Math.max(max, Math.abs(d));
    k1 += -d;
    k3 += Math.expm1(d) - d;
    deltas.push({
      position: i,
      tokenId: sampledIds[i]!,
      recorded: recorded[i]!,
      rescored: rescored[i]!,
      delta: d,
      ...(decode ? { text: decode(sampledIds[i]!) } : {}),
    });
  }
  const worst = deltas
    .filter((d) => d.delta !== 0)
    .sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta))
    .slice(0, worstN);
  return { tokens: n, meanAbsDelta: n > 0 ? abs / n : 0, maxAbsDelta: max, klK1: n > 0 ? k1 / n : 0, klK3: n > 0 ? k3 / n : 0, worst };
}

/** A session's figures from its calls', weighted by tokens. */
export function combine(calls: readonly LogprobComparison[]): Omit<LogprobComparison, 'worst'> {
  const tokens = calls.reduce((a, c) => a + c.tokens, 0);
  const weighted = (f: (c: LogprobComparison) => number) => (tokens > 0 ? calls.reduce((a, c) => a + f(c) * c.tokens, 0) / tokens : 0);
  return {
    tokens,
    meanAbsDelta: weighted((c) => c.meanAbsDelta),
    maxAbsDelta: Math.max(0, ...calls.map((c) => c.maxAbsDelta)),
    klK1: weighted((c) => c.klK1),
    klK3: weighted((c) => c.klK3),
  };
}
