import type { CallTokenRow } from '../store/requests.js';
import { commonPrefixLength } from '../core/tokens.js';
import { emptyStats, usableCalls } from '../trajectory/reconstruct.js';
import { describeDifference, type PromptDifference } from '../train/prompt-diff.js';

/**
 * Do a GRPO group's samples share one first prompt? NeMo-RL groups samples for their advantages by
 * the token ids of each sample's first prompt, not by task (NeMo-RL 7ea279a: nemo_gym.py:1012 keeps
 * the first trainable item's prompt, algorithms/utils.py:132 groups by `torch.unique`; see
 * train/nemo-rl/advantages.ts): a sample whose first prompt differs from its siblings' is a group of
 * its own, and its advantage is 0 whatever its reward. Pure: the caller reads the calls.
 */

/**
 * A sample's first prompt (server token ids), or why it has none to compare. `text`, where the
 * caller can read it: the prompt as text (the request sent upstream), read only for a split group's
 * message, to name what differs.
 */
export type FirstPrompt = { ids: readonly number[]; requestId?: string; text?: () => string | null } | { unchecked: string };

/**
 * The prompt ids of the sample's first model call that NeMo-RL would see: the main agent's first
 * call that returned server token ids (`token_source` upstream) and offered tools. That is the first
 * call of the trace polar answers or exports (gym-agent/result.ts, export --format nemo-gym), whose
 * first item's `prompt_token_ids` NeMo-RL groups by. Side calls (a title request, no tools offered)
 * and sub-agents are never part of it. Ids are compared only where the server returned them: polar
 * never re-tokenizes text to fill them in.
 */
export function sampleFirstPrompt(rows: readonly CallTokenRow[]): FirstPrompt {
  if (rows.length === 0) return { unchecked: 'no model call recorded' };
  const usable = usableCalls(rows, false, emptyStats('first-prompt'));
  const agent = usable.some((c) => c.agentId === 'main') ? 'main' : usable[0]?.agentId;
  const first = usable.find((c) => c.agentId === agent);
  if (first) return { ids: first.promptIds, requestId: first.requestId };
  return {
    unchecked: rows.some((r) => r.tokenSource === 'upstream')
      ? 'no completed model call with server token ids'
      : 'the upstream returned no token ids (token_source none)',
  };
}

export interface FirstPromptCheck {
  /** `same`: at least two samples were compared and all share one first prompt; `split`: they do not; `unchecked`: fewer than two could be compared. */
  status: 'same' | 'split' | 'unchecked';
  /** Samples whose first prompt could be compared. */
  checked: number;
  /** Distinct first prompts among them: NeMo-RL's groups for this task. */
  distinct: number;
  /** Per sample, which distinct first prompt it has (0, 1, … in order of appearance); null where it could not be compared. */
  prompt: (number | null)[];
  /**
   * Where the first two distinct prompts part: the first differing token and each one's length,
   * and, where their text could be read, what differs (`in`: "the date", "the OS version", a path…).
   */
  differsAt: { samples: [number, number]; token: number; lengths: [number, number]; in?: PromptDifference } | null;
  /** Samples that could not be compared, with why. */
  unchecked: { sample: number; reason: string }[];
}

export function compareFirstPrompts(prompts: readonly FirstPrompt[]): FirstPromptCheck {
  const keys = new Map<string, number>();
  const firstOf: number[] = [];
  const unchecked: FirstPromptCheck['unchecked'] = [];
  const prompt = prompts.map((p, i) => {
    if ('unchecked' in p) {
      unchecked.push({ sample: i, reason: p.unchecked });
      return null;
    }
    const key = p.ids.join(',');
    if (!keys.has(key)) {
      keys.set(key, keys.size);
      firstOf.push(i);
    }
    return keys.get(key)!;
  });
  const checked = prompt.filter((p) => p !== null).length;
  let differsAt: FirstPromptCheck['differsAt'] = null;
  if (firstOf.length > 1) {
    const [pa, pb] = [prompts[firstOf[0]!], prompts[firstOf[1]!]] as { ids: readonly number[]; text?: () => string | null }[];
    const [a, b] = [pa!.ids, pb!.ids];
    const [ta, tb] = [pa!.text?.() ?? null, pb!.text?.() ?? null];
    const named = ta !== null && tb !== null ? describeDifference(ta, tb, [`sample ${firstOf[0]}`, `sample ${firstOf[1]}`]) : null;
    differsAt = { samples: [firstOf[0]!, firstOf[1]!], token: commonPrefixLength(a, b), lengths: [a.length, b.length], ...(named ? { in: named } : {}) };
  }
  return { status: keys.size > 1 ? 'split' : checked >= 2 ? 'same' : 'unchecked', checked, distinct: keys.size, prompt, differsAt, unchecked };
}

/** Why a named field can still differ under polar's sandbox, and what to do about it. */
const FIELD_CAUSES: Record<string, string> = {
  'the date': 'the samples started on different days (UTC; the sandbox fixes the time zone): a group that ran across midnight',
  'the OS version': 'the samples ran on machines with different kernels or systems: give the group machines of one OS version',
  'the time zone': "the harness saw different time zones (a run outside polar's sandbox keeps the host's TZ)",
  'the hostname': "the harness saw different hostnames (a run outside polar's sandbox keeps the host's)",
};

/** The loud line for a split group (rollout's summary, gym-agent's log). */
export function splitMessage(taskId: string, check: FirstPromptCheck): string {
  const d = check.differsAt;
  const where = d ? ` (samples ${d.samples[0]} and ${d.samples[1]} part at token ${d.token}; lengths ${d.lengths[0]} and ${d.lengths[1]})` : '';
  const what = d?.in
    ? `They differ in ${d.in.summary}${FIELD_CAUSES[d.in.field] ? `: ${FIELD_CAUSES[d.in.field]}` : ''}`
    : "Something the harness reads at start differs per sample (a path, a date, an id); `polar inspect` the sessions' first calls to see what";
  return `task ${taskId}: its samples have ${check.distinct} different first prompts${where}. NeMo-RL groups GRPO samples by first-prompt token ids, so they are ${check.distinct} groups, not one, and a sample alone in its group gets advantage 0: this task would not train. ${what}`;
}

/**
 * What a rollout's summary says about its groups' first prompts: a line per split group, and one
 * for groups that could not be compared (fewer than two samples with server ids), with the reasons.
 */
export function firstPromptNotes(groups: readonly { taskId: string; firstPrompt?: FirstPromptCheck }[]): { splits: string[]; unchecked: string | null } {
  const splits = groups.flatMap((g) => (g.firstPrompt?.status === 'split' ? [splitMessage(g.taskId, g.firstPrompt)] : []));
  const open = groups.filter((g) => g.firstPrompt?.status === 'unchecked' && g.firstPrompt.prompt.length > 1);
  const reasons = [...new Set(open.flatMap((g) => g.firstPrompt!.unchecked.map((u) => u.reason)))];
  const unchecked =
    open.length > 0
      ? `first prompts not compared in ${open.length} group(s) (${open
          .slice(0, 5)
          .map((g) => g.taskId)
          .join(', ')}${open.length > 5 ? ', …' : ''}): ${reasons.slice(0, 3).join('; ') || 'fewer than two samples reached a model call'}`
      : null;
  return { splits, unchecked };
}
