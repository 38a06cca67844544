import type { SampleRow } from '../../store/rollouts.js';
import type { Store } from '../../store/store.js';
import { nemoGymResult } from '../../trajectory/export/nemo-gym.js';
import type { ResponsesItem } from '../../trajectory/export/responses-items.js';
import { type MaskKind, type MaskReason, maskFields, sampleChain } from '../../rollout/sample-mask.js';

/**
 * What `polar gym-agent` answers NeMo-RL for one `/run` (one sample), from the session it recorded:
 * `responses_create_params` echoed, a `response` whose `output` items carry the token fields on the
 * last item of each model call, `reward` (the evaluator's), and `instance_config.mask_sample` with a
 * reason when the sample must not be trained on. NeMo-RL asserts that each sample is one append-only
 * token chain (`nemo_rl/environments/nemo_gym.py`, "Non-contiguous messages found!"), so the items are
 * the main agent's first faithful trace (prefix-merging), checked again here the way NeMo-RL checks
 * it; a session that merged into more than one trace is answered with its first and masked. Sub-agent
 * calls and side calls (no tools offered) are never part of the sample; the numeric `polar_*` fields
 * count them (NeMo-RL turns a result's numeric fields into rollout metrics).
 */
export type GymRunResult = GymRunFields & Record<`polar_masked_${MaskKind}`, 0 | 1>;

interface GymRunFields {
  responses_create_params: unknown;
  response: Record<string, unknown> & { output: ResponsesItem[] };
  reward: number;
  instance_config?: { mask_sample: true };
  polar_mask_reason?: string;
  polar_session_id: string | null;
  polar_calls: number;
  polar_subagent_calls: number;
  polar_side_calls: number;
  polar_traces: number;
  /** 1 when masked; `polar_masked_<kind>` (sample-mask.ts) say why, one numeric field per kind, so NeMo-RL logs each as `<agent>/polar_masked_<kind>/mean`. */
  polar_masked: number;
  /** How many times the agent ran the row (infrastructure failures are run again). */
  polar_attempts?: number;
  /** Set on every answer by the live first-prompt check (sibling-prompts.ts). */
  polar_first_prompt_split?: 0 | 1;
  polar_first_prompt_unchecked?: 0 | 1;
}

export function gymRunResult(store: Store, sample: SampleRow, params: unknown, model: string): GymRunResult {
  const chain = sampleChain(store, sample);
  const { traces } = chain;
  const counts = {
    polar_session_id: sample.sessionId,
    polar_calls: chain.mainCalls,
    polar_subagent_calls: chain.subagentCalls,
    polar_side_calls: chain.sideCalls,
    polar_traces: traces.length,
  };
  const reasons: MaskReason[] = chain.reasons.map((r) => (r.kind === 'split' ? { ...r, text: `${r.text}; the first is answered` } : r));
  let output: ResponsesItem[] = [];
  let response: Record<string, unknown> = {};
  const first = traces[0];
  if (first) {
    const records = first.request_ids.map((id) => store.requests.get(id)!);
    const built = nemoGymResult(first, records);
    if ('problem' in built) reasons.push({ kind: 'unexportable', text: built.problem });
    else {
      output = built.response.output;
      response = built.response;
    }
  }
  const broken = chainProblem(output);
  if (broken) {
    reasons.push({ kind: 'unexportable', text: broken });
    output = [];
  }
  // A sample that ended without a reward (status error: its evaluator crashed or timed out) has none
  // to give. Masking does not keep a 0 out of its group: NeMo-RL computes each group's baseline over
  // every sample, masked ones included (advantage_estimator.py:82-87 passes ones_like(rewards);
  // the mask applies to the loss only, grpo.py:3147). So it is answered with the placeholder, whose
  // prompt ([0]) no sibling shares: a group of its own, advantage 0, out of the loss — the sample is
  // left out of its task's group, as polar's statistics and the Gym export leave it out.
  if (sample.reward === null && output.length > 0) {
    if (!reasons.some((r) => r.kind === 'no_reward'))
      reasons.push({
        kind: 'no_reward',
        text: 'no reward to train on: answered as a placeholder in a group of its own, so its siblings are grouped without it',
      });
    output = [];
  }
  if (output.length === 0) output = [placeholderItem(`msg_${sample.id}_placeholder`)];
  const masked = reasons.length > 0;
  return {
    responses_create_params: params,
    response: {
      id: `resp_${sample.id}`,
      object: 'response',
      created_at: Math.floor((sample.startedAt ?? Date.now()) / 1000),
      model,
      status: 'completed',
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
      ...response,
      output,
    },
    reward: sample.reward ?? 0,
    ...(masked ? { instance_config: { mask_sample: true as const }, polar_mask_reason: reasons.map((r) => r.text).join('; ') } : {}),
    ...counts,
    polar_masked: masked ? 1 : 0,
    ...maskFields(reasons),
  };
}

/**
 * NeMo-RL's contiguity rule, checked before answering: walking the items, the tokens so far (each
 * trainable item's prompt and generation) must be a prefix of every next trainable item's prompt.
 */
export function chainProblem(output: readonly ResponsesItem[]): string | null {
  let seen: readonly number[] = [];
  for (const item of output) {
    const gen = item.generation_token_ids as number[] | undefined;
    if (!gen || gen.length === 0) continue;
    const prompt = item.prompt_token_ids as number[];
    if (prompt.length < seen.length || seen.some((id, i) => prompt[i] !== id)) return 'not append-only: a call does not continue the tokens before it';
    seen = [...prompt, ...gen];
  }
  return null;
}

/**
 * NeMo-RL needs at least one item with generation data even for a sample it will mask ("NeMo Gym
 * returned a result with no generation data"): one token, used only when nothing was generated.
 */
export function placeholderItem(id: string): ResponsesItem {
  return {
    type: 'message',
    id,
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text: '', annotations: [] }],
    prompt_token_ids: [0],
    generation_token_ids: [0],
    generation_log_probs: [0],
  };
}

/** The placeholder's ids (this file's `msg_<sample>_placeholder`, rows.ts's `msg_refused`): it carries no prompt the server saw. */
export function isPlaceholderItem(item: ResponsesItem): boolean {
  return item.id === 'msg_refused' || (typeof item.id === 'string' && item.id.endsWith('_placeholder'));
}
