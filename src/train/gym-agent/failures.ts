import type { SampleRow } from '../../store/rollouts.js';

/**
 * Why a `/run` sample failed, as far as training cares. NeMo-RL drops a masked sample from the loss
 * but still counts its reward in its group's baseline (rollouts.py:2791-2792; the baseline at
 * grpo.py:3056-3070 comes before the mask filter at :3147). So a sample that failed for a reason
 * outside the policy (its workspace could not be made, the harness never started) is not neutral:
 * answered as reward 0 it raises its siblings' advantages. Those are retried inside the agent
 * (`infra`) before anything is answered; what fails for good, and samples the policy never saw at
 * all (no model call answered), are `config` failures: the run is set up wrong, and too many of
 * them stop NeMo-RL (FailureWindow).
 *
 * Not failures here: a session that ran and did badly (timeout, a sandbox cap, a trace that is not
 * append-only, a low reward). Those are the policy's, masked or rewarded as they are.
 */
export interface Failure {
  kind: 'infra' | 'config';
  reason: string;
}

export function classifyFailure(sample: Pick<SampleRow, 'status' | 'errorStage' | 'error'>, modelCalls: number): Failure | null {
  const detail = sample.error ? `: ${sample.error.slice(0, 300)}` : '';
  if (sample.status === 'error' && sample.errorStage === 'init') return { kind: 'infra', reason: `the workspace or its setup failed${detail}` };
  if (modelCalls === 0 && (sample.status === 'error' || sample.status === 'failed') && sample.errorStage !== 'post') {
    return { kind: 'infra', reason: `the harness ended before any model call was answered (did not start, or every call was refused)${detail}` };
  }
  if (sample.status === 'error' && sample.errorStage === 'post') return { kind: 'config', reason: `the evaluator failed${detail}` };
  if (modelCalls === 0) return { kind: 'config', reason: `no model call answered with token ids (${sample.status})` };
  return null;
}

/**
 * The share of config failures among the last `size` rows answered. NeMo-RL posts a step's rows at
 * once and waits for all of them, so with `size` = one step's rows (prompts × group size, as `polar
 * train grpo` passes it) the window is about one step. Once more than `maxShare` of a full window
 * failed, it trips and stays tripped: the agent then answers every `/run` with an error, which stops
 * NeMo-RL (nemo_gym.py:697-710) instead of letting it train on masked placeholders.
 */
export class FailureWindow {
  private readonly recent: (Failure | null)[] = [];
  private trippedWith: string | null = null;

  constructor(
    private readonly size: number,
    private readonly maxShare: number,
  ) {}

  /** The message it tripped with, or null. */
  get tripped(): string | null {
    return this.trippedWith;
  }

  /** Records one answered row; returns the message when this row trips the window. */
  record(failure: Failure | null): string | null {
    if (this.trippedWith) return this.trippedWith;
    // Infra failures that outlived their retries count as config ones: the setup is what is wrong.
    this.recent.push(failure);
    if (this.recent.length > this.size) this.recent.shift();
    const failed = this.recent.filter((f) => f !== null) as Failure[];
    if (this.recent.length < this.size || failed.length <= this.maxShare * this.size) return null;
    this.trippedWith = `${failed.length} of the last ${this.size} rows failed for reasons outside the policy (more than --max-failed-share ${this.maxShare}), so training would learn from placeholders; stopping NeMo-RL. Fix the setup and start again. Most common: ${topReasons(failed)}`;
    return this.trippedWith;
  }
}

function topReasons(failed: readonly Failure[]): string {
  const counts = new Map<string, number>();
  // Messages differ by paths and ids; the first clause groups them.
  for (const f of failed) {
    const key = f.reason.split(': ')[0]!;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const first = new Map(failed.map((f) => [f.reason.split(': ')[0]!, f.reason] as const));
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([key, n]) => `${n}× ${first.get(key)!}`)
    .join(' | ');
}
