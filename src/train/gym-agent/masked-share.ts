import { MASK_KIND_TEXT, MASK_KINDS, MASKED_SHARE_WARNING } from '../../rollout/sample-mask.js';
import type { GymRunResult } from './result.js';

/**
 * The share of masked samples per step of rows (`size` = prompts × group size, the rows NeMo-RL
 * posts at once). A masked sample trains nothing while its reward still enters its group's baseline
 * (grpo.py:3147 after :3056-3070), so a step where most samples split into several traces (a
 * harness that compacted) looks like training and moves little. Each full step of rows is judged
 * once: above MASKED_SHARE_WARNING a warning naming the kinds; above `maxShare`
 * (`--max-masked-share`) the agent trips, answering /run with an error so NeMo-RL stops.
 */
export class MaskedShare {
  private step: GymRunResult[] = [];
  private trippedWith: string | null = null;
  private steps = 0;

  constructor(
    private readonly size: number,
    private readonly maxShare: number | null,
    private readonly warnAt = MASKED_SHARE_WARNING,
  ) {}

  get tripped(): string | null {
    return this.trippedWith;
  }

  /** Records one answered row; at a step's last row returns what to say (and `stop` when it trips). */
  record(result: GymRunResult): { line: string; stop: boolean } | null {
    if (this.trippedWith) return { line: this.trippedWith, stop: true };
    this.step.push(result);
    if (this.step.length < this.size) return null;
    const rows = this.step;
    this.step = [];
    this.steps++;
    const masked = rows.filter((r) => r.polar_masked === 1).length;
    if (masked <= this.warnAt * rows.length && (this.maxShare === null || masked <= this.maxShare * rows.length)) return null;
    const kinds = MASK_KINDS.map((k) => [k, rows.filter((r) => r[`polar_masked_${k}`] === 1).length] as const)
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${n} ${MASK_KIND_TEXT[k]}`)
      .join('; ');
    const example = rows.find((r) => r.polar_masked === 1)?.polar_mask_reason;
    const head = `step ${this.steps} of rows: ${masked} of ${rows.length} samples masked (they train nothing, their rewards still enter their groups' baselines): ${kinds}${example ? `. e.g. ${example.slice(0, 240)}` : ''}`;
    if (this.maxShare !== null && masked > this.maxShare * rows.length) {
      this.trippedWith = `${head}. More than --max-masked-share ${this.maxShare}: stopping NeMo-RL.`;
      return { line: this.trippedWith, stop: true };
    }
    return { line: `warning: ${head}`, stop: false };
  }
}
