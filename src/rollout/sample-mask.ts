import type { Harness } from '../harness/types.js';
import type { SampleRow } from '../store/rollouts.js';
import type { CallTokenRow } from '../store/requests.js';
import type { Store } from '../store/store.js';
import { emptyStats, sessionTraces, usableCalls } from '../trajectory/reconstruct.js';
import { prefixMerging } from '../trajectory/strategies/prefix-merging.js';
import type { Break, BreakClass, Trajectory } from '../trajectory/types.js';

/**
 * Whether a rollout sample can be trained on as NeMo-RL trains it: one append-only token chain of
 * its main agent (nemo_gym.py's "Non-contiguous messages found!" assert), with the server's ids and
 * logprobs, and a reward. A sample that is not is masked (`instance_config.mask_sample`, out of the
 * loss; its reward still counts in its group's baseline) by `polar gym-agent`, and left out of
 * `export --format nemo-gym`. The same reasons, by kind, are what the rollout summary, the Gym
 * metrics (`polar_masked_<kind>`) and `polar train`'s view count, so a masked sample is never silent.
 */
export const MASK_KINDS = ['split', 'no_token_ids', 'no_logprobs', 'error', 'timeout', 'no_reward', 'unexportable', 'refused'] as const;
export type MaskKind = (typeof MASK_KINDS)[number];

export interface MaskReason {
  kind: MaskKind;
  text: string;
}

/** Above this share of masked samples, a rollout's summary and `polar train` say so loudly. */
export const MASKED_SHARE_WARNING = 0.25;

/** What each kind means, for a summary line. */
export const MASK_KIND_TEXT: Readonly<Record<MaskKind, string>> = {
  split: 'not append-only (the main agent split into several traces: compaction, history trimming, or a re-rendered history)',
  no_token_ids: 'no model call with server token ids',
  no_logprobs: 'calls without logprobs from the server',
  error: 'ended in error',
  timeout: 'ran past their time budget',
  no_reward: 'no reward',
  unexportable: 'a trace NeMo Gym cannot carry',
  refused: 'rows refused before running',
};

/** The sample's main agent, its traces (prefix-merging) and the reasons found on the way. */
export interface SampleChain {
  /** The main agent's usable calls (server ids, status ok, not a side call). */
  mainCalls: number;
  /** Usable calls of other agents (sub-agents). */
  subagentCalls: number;
  sideCalls: number;
  traces: Trajectory[];
  reasons: MaskReason[];
}

const BREAK_TEXT: Readonly<Record<BreakClass, string>> = {
  rewrite: 'rewrote the history before it (the harness compacted, summarised or trimmed it)',
  template: 'had an earlier answer re-rendered differently by the chat template',
  retoken: 'had an earlier answer re-tokenised differently',
  other: 'did not continue the tokens before it',
};

/** Why the main agent's calls are more than one trace: the first break, in words. */
export function splitReason(traces: number, breaks: readonly Break[]): MaskReason {
  const first = breaks[0];
  const where = first ? ` (call #${first.seq} ${BREAK_TEXT[first.class]})` : '';
  return { kind: 'split', text: `not append-only: the session's main agent merged into ${traces} traces${where}` };
}

/**
 * The sample's chain and the reasons it would be masked that the recording alone shows (the Gym
 * answer adds those it finds while building its items: result.ts). Reads the session's calls once.
 */
export function sampleChain(
  store: Store,
  sample: SampleRow,
  rows: readonly CallTokenRow[] = sample.sessionId ? store.requests.tokens(sample.sessionId) : [],
): SampleChain {
  const stats = emptyStats(prefixMerging.name);
  const usable = usableCalls(rows, false, stats);
  const mainAgent = usable.some((c) => c.agentId === 'main') ? 'main' : (usable[0]?.agentId ?? 'main');
  const main = usable.filter((c) => c.agentId === mainAgent);
  const session = sample.sessionId ? store.sessions.get(sample.sessionId) : undefined;
  const { traces, breaks } = session ? sessionTraces(session, prefixMerging, main, undefined, sample) : { traces: [], breaks: [] };
  const reasons: MaskReason[] = [];
  if (sample.status === 'error') reasons.push({ kind: 'error', text: `error at ${sample.errorStage}: ${sample.error}` });
  if (sample.status === 'timeout') reasons.push({ kind: 'timeout', text: 'the session ran past its budget (timeout)' });
  if (traces.length > 1) reasons.push(splitReason(traces.length, breaks));
  if (traces.length === 0) reasons.push({ kind: 'no_token_ids', text: 'no model call with server token ids' });
  const first = traces[0];
  if (first) {
    // The Gym export fills absent logprobs with zeros; trained on, they would claim probability 1 for
    // every sampled token (a wrong importance ratio), so such a sample is masked.
    const ids = new Set(first.request_ids);
    const calls = main.filter((c) => ids.has(c.requestId));
    const bare = calls.filter((c) => !c.logprobs || c.logprobs.length !== c.sampledIds.length).length;
    if (bare > 0)
      reasons.push({ kind: 'no_logprobs', text: `${bare} of ${calls.length} calls have no logprobs from the server (is the upstream kind right?)` });
    if (sample.reward === null && sample.status !== 'error')
      reasons.push({
        kind: 'no_reward',
        text: 'no reward to train on: answered as a placeholder in a group of its own, so its siblings are grouped without it',
      });
  }
  return {
    mainCalls: main.length,
    subagentCalls: usable.length - main.length,
    sideCalls: stats.excluded.filter((e) => e.reason.startsWith('side call')).length,
    traces,
    reasons,
  };
}

/** One `polar_masked_<kind>` field per kind, 1 where the reasons name it: every answer carries all (NeMo-RL logs the first result's keys). */
export function maskFields(reasons: readonly MaskReason[]): Record<`polar_masked_${MaskKind}`, 0 | 1> {
  const fields = {} as Record<`polar_masked_${MaskKind}`, 0 | 1>;
  for (const kind of MASK_KINDS) fields[`polar_masked_${kind}`] = reasons.some((r) => r.kind === kind) ? 1 : 0;
  return fields;
}

/** A rollout's masked samples, counted by kind (a sample with two reasons counts under both kinds, once in `samples`). */
export interface MaskedCount {
  samples: number;
  /** Samples that ended (the share's denominator). */
  of: number;
  byKind: Partial<Record<MaskKind, number>>;
  /** Up to five samples with their reasons, for the summary. */
  examples: { sampleId: string; taskId: string; reasons: string }[];
}

export function countMasked(entries: readonly { sample: SampleRow; reasons: readonly MaskReason[] }[]): MaskedCount {
  const out: MaskedCount = { samples: 0, of: entries.length, byKind: {}, examples: [] };
  for (const { sample, reasons } of entries) {
    if (reasons.length === 0) continue;
    out.samples++;
    for (const kind of new Set(reasons.map((r) => r.kind))) out.byKind[kind] = (out.byKind[kind] ?? 0) + 1;
    if (out.examples.length < 5) out.examples.push({ sampleId: sample.id, taskId: sample.taskId, reasons: reasons.map((r) => r.text).join('; ') });
  }
  return out;
}

/**
 * What a rollout, worker, gym-agent or train says at start about the harness's history rewrites:
 * with compaction off (the default), the rewrites no setting stops (`Harness.appendOnlyGap`); with
 * `--keep-compaction`, that samples longer than its compaction point split and are masked.
 */
export function compactionNotice(harness: Pick<Harness, 'name' | 'appendOnlyGap'> | null, compaction: 'off' | 'harness' | undefined): string | null {
  if (!harness) return null;
  if (compaction === 'harness')
    return `--keep-compaction: ${harness.name} keeps its own compaction and history trimming, so a sample that passes its compaction point splits into several traces (masked in NeMo-RL, left out of export --format nemo-gym)`;
  return harness.appendOnlyGap ? `${harness.name} cannot be held to one append-only trace: ${harness.appendOnlyGap}` : null;
}
