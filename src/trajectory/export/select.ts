import { SAMPLE_OUTCOMES, type SampleRow, sampleId } from '../../store/rollouts.js';
import type { Store } from '../../store/store.js';
import type { ResponseLookup } from '../conversation.js';
import { OFF_POLICY_PREFIX, reconstruct, type ReconstructStats } from '../reconstruct.js';
import type { Strategy, Trajectory } from '../types.js';
import { gymRolloutRow, GymIndices, mainAgentOf } from './gym-rollouts.js';
import { sftExample } from './sft.js';

export type ExportFormat = 'tokens' | 'sft' | 'nemo-gym';

export interface ExportSelection {
  format: ExportFormat;
  strategy: Strategy;
  /** Undefined: every session. */
  sessions?: readonly string[];
  minReward: number | null;
  /** Only samples a rollout accepted. */
  accepted: boolean;
  /** Also traces of sessions that did not end on their own. */
  includePartial: boolean;
  /** Also side calls (no tools offered while the agent's other calls had some). Not for nemo-gym. */
  includeSideCalls?: boolean;
  /** Also sessions recorded by `polar replay` (the recording played back, not a model sampling). */
  includeReplays?: boolean;
  /** Keep calls not sampled with the run's parameters trainable (default: out of the loss, counted). */
  includeOffPolicy?: boolean;
  lookup?: ResponseLookup;
}

/**
 * Why something was left out: `kind` is the short label the summary counts by (its unit is in the
 * name: a call, a trace, a session), `leftOut` the reason with the flag that keeps it.
 */
export type LeftOutKind =
  | 'side call'
  | 'failed call'
  | 'call without token ids'
  | 'off-policy call'
  | 'replay session'
  | 'partial trace'
  | 'earlier attempt'
  | 'not accepted'
  | 'unrewarded sample'
  | 'below --min-reward'
  | 'sub-agent trace'
  | 'unmerged session'
  | 'unexportable trace';

export interface LeftOut {
  leftOut: string;
  kind: LeftOutKind;
}

/** A session `polar replay --harness` recorded: the recording played back by a cassette, not sampled (replay-session.ts). */
export function isReplaySession(metadata: Record<string, unknown>): boolean {
  return typeof metadata.replay_of === 'string';
}

/**
 * The sessions asked for (`sessions`; undefined: all), in the store's order, split into those a
 * command reads and the `polar replay` recordings it leaves out (`includeReplays`: none left out).
 */
export function replaySplit(
  store: Store,
  sessions: readonly string[] | undefined,
  includeReplays: boolean,
): { kept: string[]; replays: { id: string; metadata: Record<string, unknown> }[] } {
  const wanted = sessions ? new Set(sessions) : null;
  const kept: string[] = [];
  const replays: { id: string; metadata: Record<string, unknown> }[] = [];
  for (const s of store.sessions.rows()) {
    if (wanted && !wanted.has(s.id)) continue;
    if (!includeReplays && isReplaySession(s.metadata)) replays.push(s);
    else kept.push(s.id);
  }
  return { kept, replays };
}

/**
 * The lines an export writes, each either a line in the chosen format or what was left out and why:
 * replay sessions and side calls (unless asked for), calls that failed or have no server ids,
 * partial traces, samples not accepted, traces below the reward floor, and a format's own problems.
 * Shared by `polar export` and `polar train sft --db`.
 *
 * `tokens` and `sft` write one line per trace. `nemo-gym` writes one line per sample: its main
 * agent's trace, as a Gym rollouts.jsonl row (gym-rollouts.ts). A session whose main agent did not
 * merge into one trace is left out and counted, not split: a Gym consumer counts each line as a
 * rollout of its task (one (task, rollout) key per line), so a session split into N lines would be
 * counted N times, and a row that joined them would break NeMo-RL's one-chain rule. Sub-agent traces
 * are not part of the sample's row either (as `polar gym-agent` answers), and are counted.
 */
export function* exportLines(store: Store, sel: ExportSelection, stats: ReconstructStats): Generator<{ line: unknown } | LeftOut, void> {
  const { kept: sessions, replays } = replaySplit(store, sel.sessions, sel.includeReplays === true);
  for (const s of replays)
    yield { kind: 'replay session', leftOut: `replay session: recorded by polar replay from ${String(s.metadata.replay_of)} (--include-replays keeps it)` };
  const gym = sel.format === 'nemo-gym';
  const indices = new GymIndices();
  let counted = stats.excluded.length;
  const excludedCalls = function* (): Generator<LeftOut> {
    for (; counted < stats.excluded.length; counted++) yield excludedCall(stats.excluded[counted]!.reason);
  };
  let group: Trajectory[] = [];
  const flush = function* (): Generator<{ line: unknown } | LeftOut> {
    if (group.length === 0) return;
    if (gym) yield* gymSession(store, sel, group, indices);
    else for (const trace of group) yield* traceLine(store, sel, trace);
    group = [];
  };
  for (const trace of reconstruct(
    store,
    {
      strategy: sel.strategy,
      sessions,
      includeSideCalls: !gym && sel.includeSideCalls === true,
      // SFT trains on the text, re-tokenized, with no logprobs: how it was sampled does not enter the loss.
      includeOffPolicy: sel.includeOffPolicy === true || sel.format === 'sft',
    },
    stats,
  )) {
    if (group.length > 0 && group[0]!.session_id !== trace.session_id) {
      yield* flush();
      yield* excludedCalls();
    }
    group.push(trace);
  }
  yield* flush();
  yield* excludedCalls();
}

function excludedCall(reason: string): LeftOut {
  if (reason.startsWith('side call')) return { kind: 'side call', leftOut: `${reason} (--include-side-calls keeps it)` };
  if (reason.startsWith(OFF_POLICY_PREFIX)) return { kind: 'off-policy call', leftOut: `call ${reason}` };
  if (reason === 'no server token ids') return { kind: 'call without token ids', leftOut: 'call without server token ids (the upstream returned none)' };
  return { kind: 'failed call', leftOut: `call ${reason}` };
}

/** The selection rules every format applies to a trace; null when it is kept. */
function selectionRule(store: Store, sel: ExportSelection, trace: Trajectory): LeftOut | null {
  // Sessions named one by one (--session) are exported as asked.
  const earlier = sel.sessions === undefined ? earlierAttempt(store, trace) : null;
  if (earlier) return earlier;
  if (trace.partial && !sel.includePartial) return { kind: 'partial trace', leftOut: `partial: session ${trace.status} (--include-partial keeps it)` };
  if (sel.accepted && trace.accepted !== true) return { kind: 'not accepted', leftOut: notAccepted(store, trace) };
  if (sel.minReward !== null && (trace.reward === null || trace.reward < sel.minReward)) {
    return { kind: 'below --min-reward', leftOut: trace.reward === null ? 'no reward (--min-reward)' : `reward below ${sel.minReward} (--min-reward)` };
  }
  return null;
}

/**
 * A session that was an earlier attempt of a rollout sample that ran again (a queued sample whose
 * worker lost its lease, was killed or was cut off; a resumed local rollout): the sample names
 * another session, so this one carries no reward and is not the sample's trace. It was exported as
 * a reward-less trace of its own when it ended by itself, or counted as "partial" when it was
 * stopped, which read as the sample itself left out (issue 43). Said as what it is, and left out.
 */
function earlierAttempt(store: Store, trace: Trajectory): LeftOut | null {
  if (trace.rollout_id !== null) return null; // the attempt its sample names
  const m = store.sessions.get(trace.session_id)?.metadata;
  if (typeof m?.rollout_id !== 'string' || typeof m.task_id !== 'string' || typeof m.sample_index !== 'number') return null;
  const id = sampleId(m.rollout_id, m.task_id, m.sample_index);
  const sample = store.rollouts.sample(id);
  if (!sample || sample.sessionId === trace.session_id) return null;
  return {
    kind: 'earlier attempt',
    leftOut: `earlier attempt of sample ${id}, which ran again: its trace is session ${sample.sessionId ?? '(none yet)'}'s (\`polar export --rollout ${m.rollout_id}\` exports each sample's final attempt)`,
  };
}

/**
 * Why --accepted left a trace out. A rollout judges its samples only when it ran with --accept: the
 * samples of one without it are neither accepted nor rejected, which is not the same as "not a
 * rollout sample" and has its own remedy. A rollout that ran with --accept judges a sample once it
 * ends with a reward: one that ended `error` (or has not ended) was never judged, and saying the
 * rollout "ran without --accept" would send the user to run it again for nothing.
 */
function notAccepted(store: Store, trace: Trajectory): string {
  if (trace.accepted === false) return 'not accepted (--accepted)';
  if (trace.rollout_id === null) return 'not a rollout sample (--accepted)';
  const accept = store.rollouts.get(trace.rollout_id)?.accept;
  if (accept) return notJudged(store, trace, accept);
  return `none accepted: rollout ${trace.rollout_id} ran without --accept, so it accepted no sample (--accepted); choose by reward with --min-reward R, or run the rollout again with --accept 'reward>=1'`;
}

/** A sample of a rollout with --accept that --accept never judged: it ended without a reward, or has not ended. */
function notJudged(store: Store, trace: Trajectory, accept: string): string {
  const status = store.rollouts.sampleForSession(trace.session_id)?.status ?? 'unknown';
  const ended = (SAMPLE_OUTCOMES as readonly string[]).includes(status);
  return ended
    ? `not judged: the sample ended ${status} without a reward, so rollout ${trace.rollout_id}'s --accept '${accept}' never judged it (--accepted; \`polar rollout show ${trace.rollout_id}\` says why)`
    : `not judged yet: the sample has not ended (${status}); rollout ${trace.rollout_id}'s --accept '${accept}' judges it when it ends (--accepted)`;
}

function* traceLine(store: Store, sel: ExportSelection, trace: Trajectory): Generator<{ line: unknown } | LeftOut> {
  const rule = selectionRule(store, sel, trace);
  if (rule) {
    yield rule;
    return;
  }
  const line = sel.format === 'sft' ? sftExample(store.requests.get(trace.request_ids[trace.request_ids.length - 1]!)!, sel.lookup) : trace;
  if ('problem' in line) yield { kind: 'unexportable trace', leftOut: line.problem };
  else yield { line };
}

function* gymSession(store: Store, sel: ExportSelection, traces: readonly Trajectory[], indices: GymIndices): Generator<{ line: unknown } | LeftOut> {
  const agent = mainAgentOf(traces);
  const main = traces.filter((t) => t.agent_id === agent);
  for (const t of traces)
    if (t.agent_id !== agent)
      yield { kind: 'sub-agent trace', leftOut: `sub-agent trace (agent ${t.agent_id}): not part of the sample's Gym row (--format tokens keeps it)` };
  if (main.length > 1) {
    yield {
      kind: 'unmerged session',
      leftOut: `session did not merge into one token chain: its main agent has ${main.length} traces, and a Gym row is one sample's one chain (--format tokens keeps every trace)`,
    };
    return;
  }
  const trace = main[0]!;
  const rule = selectionRule(store, sel, trace);
  if (rule) {
    yield rule;
    return;
  }
  const sample = trace.rollout_id !== null ? store.rollouts.sampleForSession(trace.session_id) : undefined;
  const unrewarded = unrewardedSample(trace, sample);
  if (unrewarded) {
    yield unrewarded;
    return;
  }
  const row = gymRolloutRow(
    trace,
    trace.request_ids.map((id) => store.requests.get(id)!),
    indices,
    { sampleIndex: sample?.sampleIndex ?? null, ...(sel.lookup ? { lookup: sel.lookup } : {}) },
  );
  if ('problem' in row) yield { kind: 'unexportable trace', leftOut: row.problem };
  else yield { line: row };
}

/**
 * A rollout sample without a reward (it ended `error`: an evaluator that crashed or timed out, a
 * workspace that could not be made) has no Gym row. Gym and NeMo-RL need a number in every row, and
 * a 0 in its place is a reward the task never gave: the group's mean (Gym's per-task statistics,
 * NeMo-RL's baseline) would count it, where polar's own statistics leave the sample out
 * (rollout/stats.ts). Masking (`instance_config.mask_sample`) would not help: NeMo-RL only zeroes a
 * masked sample's loss (grpo.py:3147, `_apply_mask_sample_filter` :2155-2169) and still counts its
 * reward in the group's baseline (advantage_estimator.py:82-87 passes `torch.ones_like(rewards)` as
 * the valid mask; NeMo-RL 7ea279a). So it is left out and counted, the same rule as polar's
 * statistics. A session outside a rollout keeps its row (reward 0, `polar.rewarded: false`): it is a
 * group of its own, with no statistics to disagree with.
 */
function unrewardedSample(trace: Trajectory, sample: SampleRow | undefined): LeftOut | null {
  if (trace.rollout_id === null || trace.reward !== null) return null;
  return {
    kind: 'unrewarded sample',
    leftOut: `rollout sample without a reward (it ended ${sample?.status ?? 'without one'}): polar's group statistics leave it out, and a reward-0 row would lower its group's mean (\`polar rollout show ${trace.rollout_id}\` says why)`,
  };
}
