import { MASK_KIND_TEXT, MASKED_SHARE_WARNING, type MaskKind } from '../rollout/sample-mask.js';
import { ZERO_ADVANTAGE } from './nemo-rl/advantages.js';

/**
 * NeMo-RL's stdout, read line by line into what a live view and metrics.jsonl need (pure). The lines
 * are NeMo-RL's own (`nemo_rl/algorithms/grpo.py` and `sft.py` at 7ea279a): the `SETUP COMPLETE`
 * banner, `===== Step s/M =====` banners, `▶ …` phase lines, `📊 Training Results:` with `• Loss:`,
 * `• Avg Reward:`, `⏱️  Timing:` with `• Total step time:`, validation, and checkpoint saves.
 */
export type Phase = 'setup' | 'generation' | 'training' | 'validation' | 'checkpoint' | 'done';

export interface StepMetrics {
  /** The step across epochs (NeMo-RL's `total_steps + 1`, as its checkpoints are named), not the banner's. */
  step: number;
  maxSteps: number | null;
  /** The epoch it ran in (1-based), null before an epoch banner. */
  epoch: number | null;
  loss: number | null;
  reward: number | null;
  stepTimeS: number | null;
  generationLength: number | null;
  /**
   * NeMo-RL's `advantages/mean|min|max` over the step's response tokens (grpo.py:3439-3446). NeMo-RL
   * sends them to its logger only, never to stdout, so no line here sets them: run-train.ts fills
   * them in from the TensorBoard events when they arrive, after the step's lines. Null until then.
   */
  advantages: { mean: number | null; min: number | null; max: number | null } | null;
  /**
   * The share of the step's samples polar's agent masked, and of each kind (`polar_masked_<kind>`,
   * sample-mask.ts), from the same TensorBoard events (tensorboard.ts stepMasked). Null until then.
   */
  masked?: { share: number; byKind: Record<string, number> } | null;
}

export interface TrainProgress {
  phase: Phase;
  /** The global step (see StepMetrics.step). */
  step: number;
  /** The run's steps: the config's max_num_steps when given, else what the banners imply. */
  maxSteps: number | null;
  /** From NeMo-RL's `Epoch e/E` banner. */
  epoch: number | null;
  epochs: number | null;
  /** The run's max_num_steps, when the caller knows it (the banner's M is per epoch). */
  totalSteps: number | null;
  setupSeconds: number | null;
  /** The step whose results are being read, completed when its total step time arrives. */
  current: StepMetrics;
  /** Steps with results, newest last. */
  completed: StepMetrics[];
  lastLine: string;
}

/** `totalSteps`: the run's max_num_steps, so the live view counts to it rather than to one epoch's steps. */
export function initialProgress(totalSteps: number | null = null): TrainProgress {
  return {
    phase: 'setup',
    step: 0,
    maxSteps: totalSteps,
    epoch: null,
    epochs: null,
    totalSteps,
    setupSeconds: null,
    current: emptyStep(0, totalSteps, null),
    completed: [],
    lastLine: '',
  };
}

const STEP = /^=+ Step (\d+)\/(\d+) =+$/;
const EPOCH = /^=+ Epoch (\d+)\/(\d+) =+$/;
const NUM = '([-+]?(?:\\d+\\.?\\d*(?:[eE][-+]?\\d+)?|nan|inf))';

/** Reads one line; returns the step that just completed, if this line completed one. */
export function readLine(p: TrainProgress, raw: string): StepMetrics | null {
  const line = raw.replace(/\r$/, '');
  const text = line.trim();
  if (text) p.lastLine = text;
  const epoch = EPOCH.exec(text);
  if (epoch) {
    p.epoch = Number(epoch[1]);
    p.epochs = Number(epoch[2]);
  }
  const step = STEP.exec(text);
  if (step) {
    // The banner's `Step k/M` counts within an epoch and starts again at 1 in the next
    // (grpo.py:2823, 3791, 3812; sft.py:439, 657, 673 at 7ea279a), M being min(batches per epoch,
    // max_num_steps): epochs before this one ran M steps each. With multiple dataloaders M is
    // max_num_steps and there is one epoch.
    const perEpoch = Number(step[2]);
    p.step = ((p.epoch ?? 1) - 1) * perEpoch + Number(step[1]);
    p.maxSteps = p.totalSteps ?? perEpoch * (p.epochs ?? 1);
    p.current = emptyStep(p.step, p.maxSteps, p.epoch);
    p.phase = 'generation';
    return null;
  }
  if (/^SETUP COMPLETE$/.test(text)) p.phase = 'generation';
  const setup = /^Total setup time: ([\d.]+)s/.exec(text);
  if (setup) p.setupSeconds = Number(setup[1]);
  if (/^▶ (Generating responses|Preparing batch|Processing rewards|Computing advantages)/.test(text) || /Collecting rollouts/.test(text))
    p.phase = 'generation';
  if (/^▶ (Computing logprobs|Preparing for training|Training policy|Taking a training step)/.test(text)) p.phase = 'training';
  if (/^▶ Starting validation/.test(text) || /^📊 Validation Results/.test(text)) p.phase = 'validation';
  if (/^Saving checkpoint for step/.test(text)) p.phase = 'checkpoint';
  const value = (label: string) => new RegExp(`^• ${label}: ${NUM}`).exec(text);
  const loss = value('Loss');
  if (loss) p.current.loss = Number(loss[1]);
  const reward = value('Avg (?:Filtered )?Reward');
  if (reward) p.current.reward = Number(reward[1]);
  const length = value('Mean Generation Length');
  if (length) p.current.generationLength = Number(length[1]);
  const time = /^• Total step time: ([\d.]+)s/.exec(text);
  if (time) {
    p.current.stepTimeS = Number(time[1]);
    const done = { ...p.current };
    p.completed.push(done);
    return done;
  }
  return null;
}

function emptyStep(step: number, maxSteps: number | null, epoch: number | null): StepMetrics {
  return { step, maxSteps, epoch, loss: null, reward: null, stepTimeS: null, generationLength: null, advantages: null };
}

/**
 * What to say after a step where more than MASKED_SHARE_WARNING of the samples were masked: they
 * train nothing while their rewards still enter their groups' baselines. Null otherwise.
 */
export function maskedWarning(step: StepMetrics): string | null {
  const m = step.masked;
  if (!m || m.share <= MASKED_SHARE_WARNING) return null;
  const kinds = Object.entries(m.byKind)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${Math.round(v * 100)}% ${MASK_KIND_TEXT[k as MaskKind] ?? k}`);
  return `step ${step.step}: ${Math.round(m.share * 100)}% of its samples were masked and trained nothing${kinds.length > 0 ? ` (${kinds.join('; ')})` : ''}; polar gym-agent's reasons are in train.log ("masked"). --max-masked-share stops a run at such a step`;
}

/**
 * What to say, loudly, after a step whose every advantage was 0: the policy cannot move (LoRA's B
 * starts at 0, so the adapter stays as it was) however the rewards look. The usual cause is that the
 * samples of each task did not share one first prompt, so NeMo-RL made each its own group
 * (algorithms/utils.py:132-159 at 7ea279a), or that every group's rewards were equal. Null otherwise,
 * or when the step did not report its advantages.
 */
export function zeroAdvantageWarning(step: StepMetrics): string | null {
  const a = step.advantages;
  // Within ±ZERO_ADVANTAGE: rounding noise of equal non-integer rewards moves nothing.
  if (a?.min == null || a.max == null || Math.abs(a.min) > ZERO_ADVANTAGE || Math.abs(a.max) > ZERO_ADVANTAGE) return null;
  return `step ${step.step}: every advantage is 0 (advantages/min and /max within ±${ZERO_ADVANTAGE}), so this step cannot change the policy, whatever its rewards${step.reward !== null ? ` (mean ${step.reward})` : ''}. Either each group's rewards were all equal, or the samples of a task did not share one first prompt and NeMo-RL made each its own group: look for "first prompt" warnings from polar gym-agent in train.log`;
}
