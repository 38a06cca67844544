import { isRecord } from '../core/chat.js';
import type { SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import { exportLines } from '../trajectory/export/select.js';
import { emptyStats } from '../trajectory/reconstruct.js';
import { getStrategy } from '../trajectory/registry.js';
import type { Trajectory } from '../trajectory/types.js';
import type { ServedTask } from './request.js';

/**
 * Polar's result models built from polar's records (NVIDIA-NeMo/ProRL-Agent-Server
 * src/polar/rollout/models.py:188-218, src/polar/trajectory/models.py:125-219; pins in
 * fixtures/polar-api/contract.json). A session's traces are exactly what `polar export --format
 * tokens --strategy <builder>` writes for it (the same selection: side calls and calls without the
 * server's ids left out), so the ids and logprobs are the server's, never re-tokenized.
 */
export type Json = Record<string, unknown>;

export type SessionStatus = 'COMPLETED' | 'ERROR' | 'TIMEOUT';

/** Why a sample has no outcome of its own: cancelled by DELETE, or cut off once enough sessions were usable. */
export type Cut = { kind: 'early_stop'; usable: number; threshold: number; elapsedMs: number } | { kind: 'cancelled' };

/**
 * One sample as Polar's SessionResult. Statuses (gateway/node.py:651-656,1024-1031): completed →
 * COMPLETED; the harness exiting non-zero (`failed`) and polar's own errors → ERROR; a timeout →
 * TIMEOUT. A session that is not COMPLETED is masked as Polar masks it (mask_noncompleted,
 * gateway/node.py:1231-1309): each trace's loss_mask all 0 and reward 0.0, `training_filter` saying why.
 */
export function sessionResult(store: Store, served: ServedTask, sample: SampleRow, nodeId: string, cut: Cut | null, submittedAt: number): Json {
  const status = sessionStatus(sample, cut);
  const agentTimeout = status === 'TIMEOUT' && isAgentTimeout(served, sample);
  const error = status === 'COMPLETED' ? null : errorText(sample, cut, agentTimeout);
  const traces = sample.sessionId ? sessionTraces(store, served, sample) : [];
  const filtered = status === 'COMPLETED' ? traces : traces.map((t) => masked(t, status, error ?? status, agentTimeout));
  const echo = echoed(served.metadata);
  const cutFlags = cut?.kind === 'early_stop' ? earlyStopFlags(cut) : {};
  return {
    session_id: sample.sessionId ?? sample.id,
    task_id: served.taskId,
    status,
    trajectory: {
      status,
      metadata: {
        builder: served.strategy === 'prefix-merging' ? 'prefix_merging' : 'per_request',
        session_id: sample.sessionId,
        task_id: served.taskId,
        record_count: traces.reduce((n, t) => n + t.request_ids.length, 0),
        trace_count: filtered.length,
        task_metadata: served.metadata,
        ...echo,
        polar: { rollout_id: sample.rolloutId, sample_id: sample.id, sample_index: sample.sampleIndex, outcome: sample.status },
        // Whose budget ended a timed-out agent, as Polar's gateway records it (_attach_agent_result_metadata).
        ...(sample.timing.agent_timeout_own !== undefined
          ? { agent_result: { status: 'timeout', return_code: -1, timeout_source: agentTimeout ? 'agent' : 'session', timeout_stage: 'exec' } }
          : {}),
        ...cutFlags,
      },
      traces: filtered.map((t) => polarTrace(store, t, served, status)),
      error,
    },
    timing: sessionTiming(sample, submittedAt),
    node_id: nodeId,
    error,
    metadata: { ...served.metadata, ...cutFlags },
  };
}

function sessionStatus(sample: SampleRow, cut: Cut | null): SessionStatus {
  if (cut) return 'ERROR';
  if (sample.status === 'completed') return 'COMPLETED';
  if (sample.status === 'timeout') return 'TIMEOUT';
  return 'ERROR';
}

function errorText(sample: SampleRow, cut: Cut | null, agentTimeout: boolean): string {
  if (cut?.kind === 'early_stop') return `session cancelled after rollout batch reached its minimum usable session count (${cut.usable}/${cut.threshold})`;
  if (cut?.kind === 'cancelled') return 'session cancelled: the task was cancelled (DELETE /rollout/task/{task_id})';
  // Polar's own words for the two budgets (gateway/node.py _await_with_agent_budget).
  if (sample.status === 'timeout') return sample.error ?? (agentTimeout ? 'agent execution timeout' : 'session execution timeout');
  if (sample.status === 'failed') return 'the agent exited with a non-zero status';
  return sample.error ?? `the session ended ${sample.status}`;
}

/** Polar's straggler flags (rollout/pipeline.py:780-812). */
function earlyStopFlags(cut: Extract<Cut, { kind: 'early_stop' }>): Json {
  return {
    early_stop_cancelled: true,
    fully_masked: true,
    early_stop_reason: 'minimum_usable_sessions_reached',
    early_stop_min_usable_sessions: cut.threshold,
    early_stop_usable_sessions: cut.usable,
    early_stop_elapsed_ms: cut.elapsedMs,
  };
}

/** The keys Polar's builders copy to a trajectory's top level (per_request.py:49-51, prefix_merging.py:396-398). */
function echoed(metadata: Json): Json {
  const out: Json = {};
  for (const key of ['group_id', 'policy_version', 'rollout_step']) if (key in metadata) out[key] = metadata[key];
  return out;
}

/** The session's traces as `polar export --format tokens` writes them (partial ones kept: the status says what they are). */
export function sessionTraces(store: Store, served: ServedTask, sample: SampleRow): Trajectory[] {
  const strategy = getStrategy(served.strategy);
  const out: Trajectory[] = [];
  const selection = { format: 'tokens' as const, strategy, sessions: [sample.sessionId!], minReward: null, accepted: false, includePartial: true };
  for (const item of exportLines(store, selection, emptyStats(strategy.name))) if ('line' in item) out.push(item.line as Trajectory);
  return out;
}

/**
 * Polar's timeout the policy is trained on (gateway/node.py _is_trainable_agent_timeout,
 * contract.json semantics.mask_noncompleted): the agent ran out of its own budget
 * (metadata.agent_timeout, from RUN) before the session's; without metadata.agent_timeout Polar has
 * no agent deadline, and every timeout is the session's.
 */
function isAgentTimeout(served: ServedTask, sample: SampleRow): boolean {
  return served.metadata.agent_timeout !== undefined && served.metadata.agent_timeout !== null && sample.timing.agent_timeout_own === 1;
}

/**
 * A trace of a session that is not COMPLETED, as Polar's _mask_noncompleted_trajectory leaves it:
 * reward 0.0 always; the loss_mask kept only for the agent's own timeout where the trace's policy
 * data is aligned (tokens, a trainable one, a finite logprob for each), all 0 otherwise;
 * `training_filter` saying which, with `trainable` only for an agent timeout.
 */
function masked(t: Trajectory, status: SessionStatus, detail: string, agentTimeout: boolean): Trajectory {
  const keep = agentTimeout && aligned(t);
  const reason = agentTimeout ? (keep ? 'agent_timeout' : 'agent_timeout_unaligned') : status === 'TIMEOUT' ? 'session_timeout' : 'session_error';
  return {
    ...t,
    loss_mask: keep ? t.loss_mask : t.loss_mask.map(() => 0 as const),
    reward: 0,
    metadata: {
      ...t.metadata,
      training_filter: { masked: !keep, reason, detail, ...(agentTimeout ? { trainable: keep } : {}), original_reward: t.reward },
    },
  };
}

/** Polar's _has_aligned_policy_data: response tokens, a mask and logprobs of their length, a trainable token, every logprob finite. */
function aligned(t: Trajectory): boolean {
  const lp = t.response_logprobs;
  return (
    t.response_ids.length > 0 &&
    t.loss_mask.length === t.response_ids.length &&
    t.loss_mask.includes(1) &&
    lp !== null &&
    lp !== undefined &&
    lp.length === t.response_ids.length &&
    lp.every((v) => v !== null && Number.isFinite(v))
  );
}

/** One trace as Polar's Trace (trajectory/models.py:125-169). Reward: the evaluator's (per-trace, else the sample's); null without an evaluator. */
function polarTrace(store: Store, t: Trajectory, served: ServedTask, status: SessionStatus): Json {
  const first = store.requests.get(t.request_ids[0]!);
  const request = parse(first?.originalRequest ?? null);
  const reward = served.evaluator === null && status === 'COMPLETED' ? null : t.reward;
  return {
    prompt_ids: [...t.prompt_ids],
    response_ids: [...t.response_ids],
    loss_mask: [...t.loss_mask],
    prompt_messages: promptMessages(request),
    response_messages: t.request_ids.map((id) => store.requests.get(id)?.assistantMessage).filter(isRecord),
    tools: Array.isArray(request?.tools) ? request.tools.filter(isRecord) : null,
    finish_reason: t.finish_reason,
    response_logprobs: t.response_logprobs ? [...t.response_logprobs] : null,
    reward,
    metadata: {
      ...t.metadata,
      session_id: t.session_id,
      task_id: served.taskId,
      trace_index: t.trace_index,
      agent_id: t.agent_id,
      request_ids: t.request_ids,
      ...echoed(served.metadata),
    },
  };
}

/** The first call's conversation as its API sent it: chat and Anthropic `messages`, Responses `input`, Google `contents`. */
function promptMessages(request: Json | null): Json[] {
  const list = request?.messages ?? request?.input ?? request?.contents;
  return Array.isArray(list) ? list.filter(isRecord) : [];
}

function parse(text: string | null): Json | null {
  if (!text) return null;
  try {
    const v = JSON.parse(text) as unknown;
    return isRecord(v) ? v : null;
  } catch {
    return null;
  }
}

/**
 * polar's phase times as SessionTiming. Only the four keys the public release defines (its
 * SessionTiming forbids any other, contract.json models.SessionTiming.public_release_keys), so a
 * trainer on either version takes it. register_to_init_queue_ms: from the submit to the sample's
 * INIT (its wait for a slot, where dispatch_priority counts); init_ms: preparing its workspace;
 * run_ms: the agent (the wait for a run slot is polar's ready_ms, in no key); postrun_ms: collecting and scoring.
 */
export function sessionTiming(sample: SampleRow, submittedAt: number): Json {
  const t = sample.timing;
  return {
    register_to_init_queue_ms: sample.startedAt !== null ? Math.max(0, sample.startedAt - submittedAt) : 0,
    init_ms: t.init_ms ?? 0,
    run_ms: t.run_ms ?? 0,
    postrun_ms: t.post_ms ?? 0,
  };
}
