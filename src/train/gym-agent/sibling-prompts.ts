import { compareFirstPrompts, type FirstPrompt, splitMessage } from '../../rollout/first-prompts.js';
import { gymResultSample } from '../nemo-rl/advantages.js';
import { type GymRunResult, isPlaceholderItem } from './result.js';

/**
 * The live first-prompt check of `polar gym-agent`: do the samples of one GRPO group answer NeMo-RL
 * with one first prompt? NeMo-RL groups samples by the first trainable item's `prompt_token_ids`
 * (nemo_gym.py:1012, algorithms/utils.py:132 at 7ea279a), so a group whose samples differ there is
 * several groups, each sample alone getting advantage 0 (train/nemo-rl/advantages.ts).
 *
 * Which rows are siblings. NeMo-RL repeats each dataset row `num_generations_per_prompt` times,
 * consecutively (grpo.py:2845-2852 `batch.repeat_interleave`), and numbers the step's rows 0, 1, …
 * as `_rowidx` before posting them (rollouts.py:2222-2244 `_prepare_nemo_gym_rows`, called once per
 * step at :2403), so within a step every row has its own `_rowidx` and the copies of a task's row
 * are rows of that task. The agent is not told the group size nor where a step ends, so siblings
 * here are the rows of one task since its `_rowidx` last repeated: a repeat means a new step (a
 * step never repeats an index). Two rows of one task in one step are one NeMo-RL group anyway (same
 * first prompt), so counting them together is right; a step whose rows of a task take indexes the
 * last step's did not may be counted with it, which only asks more of the render (every sample of a
 * task must render one first prompt in any step). Rows without `_rowidx` (not from NeMo-RL) are
 * siblings by task alone. A result is compared with the results of its siblings answered before it.
 */
export interface SiblingCheck {
  /** 1 once this sample's siblings so far have more than one first prompt. A numeric result field: NeMo-RL logs `<agent>/polar_first_prompt_split/{mean,max,min}` (rollouts.py:2719-2740). */
  polar_first_prompt_split: 0 | 1;
  /** 1 when this sample's first prompt could not be compared (a masked placeholder: no ids from the server, a refused row). */
  polar_first_prompt_unchecked: 0 | 1;
}

interface Siblings {
  rowIdx: Set<number>;
  prompts: FirstPrompt[];
  said: boolean;
  saidUnchecked: boolean;
}

export class SiblingPrompts {
  private readonly current = new Map<string, Siblings>();

  /** `textOf`: a session's first prompt as text (group-first-prompts.ts), read to name what a split group's samples differ in. */
  constructor(
    private readonly say: (line: string) => void,
    private readonly textOf?: (sessionId: string) => string | null,
  ) {}

  /** A row arrived: the siblings it belongs to (null for a row with no task, which is never compared). */
  join(taskId: string | null, rowIdx: unknown): Siblings | null {
    if (taskId === null) return null;
    const idx = typeof rowIdx === 'number' && Number.isInteger(rowIdx) ? rowIdx : null;
    let group = this.current.get(taskId);
    if (!group || (idx !== null && group.rowIdx.has(idx))) {
      group = { rowIdx: new Set(), prompts: [], said: false, saidUnchecked: false };
      this.current.set(taskId, group);
    }
    if (idx !== null) group.rowIdx.add(idx);
    return group;
  }

  /** The row's result is ready: compare its first prompt with its siblings' so far; say it loudly once per group when they part. */
  check(taskId: string | null, group: Siblings | null, result: GymRunResult): SiblingCheck {
    const found = resultFirstPrompt(result);
    const session = result.polar_session_id;
    const textOf = this.textOf;
    const prompt = textOf && session && !('unchecked' in found) ? { ...found, text: () => textOf(session) } : found;
    if (!group || taskId === null) return { polar_first_prompt_split: 0, polar_first_prompt_unchecked: 1 };
    group.prompts.push(prompt);
    const check = compareFirstPrompts(group.prompts);
    if (check.status === 'split' && !group.said) {
      group.said = true;
      this.say(`polar gym-agent: FIRST PROMPT SPLIT: ${splitMessage(taskId, check)}`);
    }
    if ('unchecked' in prompt && !group.saidUnchecked) {
      group.saidUnchecked = true;
      this.say(`polar gym-agent: task ${taskId}: a sample's first prompt could not be compared with its siblings' (${prompt.unchecked})`);
    }
    return { polar_first_prompt_split: check.status === 'split' ? 1 : 0, polar_first_prompt_unchecked: 'unchecked' in prompt ? 1 : 0 };
  }
}

/**
 * What NeMo-RL groups the result by: its first trainable item's prompt ids (nemo_gym.py:822-1012).
 * A masked placeholder (result.ts placeholderItem, rows.ts refusedResult: one [0] token standing in
 * for a sample with nothing to answer) carries no prompt the server saw, so it is not compared.
 */
export function resultFirstPrompt(result: GymRunResult): FirstPrompt {
  const sample = gymResultSample(result);
  if (!sample) return { unchecked: 'no trainable item' };
  if (result.response.output.some(isPlaceholderItem)) return { unchecked: result.polar_mask_reason ?? 'a masked placeholder' };
  return { ids: sample.firstPrompt };
}
