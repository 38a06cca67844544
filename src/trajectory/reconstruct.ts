import type { CallTokenRow, CallTokenViews } from '../store/requests.js';
import type { SampleRow } from '../store/rollouts.js';
import type { SessionRow } from '../store/sessions.js';
import type { Store } from '../store/store.js';
import { offPolicyReason } from '../upstream/sampling-policy.js';
import { runSampling, type OnPolicyOptions } from './on-policy.js';
import { numberArray } from '../core/tokens.js';
import type { Break, BreakClass, CallTokens, Strategy, TokenText, Trajectory } from './types.js';

export interface ReconstructOptions {
  strategy: Strategy;
  /** Sessions to read (an empty list: none); all of them when not given. */
  sessions?: readonly string[];
  text?: TokenText;
  /** Keep calls that look like side traffic (no tools offered while the agent's other calls had some). */
  includeSideCalls?: boolean;
  /** Keep calls not sampled with the run's parameters trainable (default: left out of the loss). */
  includeOffPolicy?: boolean;
}

export interface ReconstructStats {
  strategy: string;
  sessions: number;
  calls: number;
  /** Calls that went into traces. */
  used: number;
  excluded: { requestId: string; reason: string }[];
  traces: number;
  /** Calls per trace. */
  mergeRatio: number;
  /** Tokens a trainer processes in per-request form (every call's prompt + sampled ids) and merged. */
  tokensPerRequest: number;
  tokensMerged: number;
  breaks: Record<BreakClass, number>;
  breakExamples: { requestId: string; previousRequestId: string; class: BreakClass; position: number; expected?: string; found?: string }[];
  /** Re-rendered boundaries joined under --allow-rerender (0 for faithful merging). */
  contextDrift: number;
  /**
   * How prompts were built, where polar built or pinned them (token-in/token-out and nemo-rl
   * upstreams): bridged calls, full renders by reason, and bridged calls that did not land in the
   * same trace as the call they extend (0 unless a parent was left out or retried).
   */
  prompts: { bridged: number; full: number; fullReasons: Record<string, number>; bridgedUnmerged: string[] };
}

/**
 * Recordings to trajectories, one session at a time in creation order (memory is bounded by the
 * largest session, not the database). Calls without server token ids, failed or aborted calls, and
 * (by default) side calls are not trained on; each is listed with its reason.
 */
export function* reconstruct(
  store: Store,
  options: ReconstructOptions,
  stats: ReconstructStats = emptyStats(options.strategy.name),
): Generator<Trajectory, void> {
  const wanted = options.sessions ? new Set(options.sessions) : null;
  for (const summary of store.sessions.rows()) {
    if (wanted && !wanted.has(summary.id)) continue;
    stats.sessions++;
    const rows = store.requests.tokenViews(summary.id);
    const calls = usableCalls(rows, options.includeSideCalls === true, stats, {
      includeOffPolicy: options.includeOffPolicy === true,
      run: runSampling(store, summary.id),
    });
    const { traces, breaks } = sessionTraces(summary, options.strategy, calls, options.text, store.rollouts.sampleForSession(summary.id));
    countPrompts(rows, calls, traces, stats.prompts);
    for (const trace of traces) {
      stats.traces++;
      stats.contextDrift += typeof trace.metadata.context_drift === 'number' ? trace.metadata.context_drift : 0;
      stats.tokensMerged += trace.prompt_ids.length + trace.response_ids.length;
      yield trace;
    }
    for (const b of breaks) {
      stats.breaks[b.class]++;
      if (stats.breakExamples.length < 5)
        stats.breakExamples.push({
          requestId: b.requestId,
          previousRequestId: b.previousRequestId,
          class: b.class,
          position: b.position,
          ...decodedAt(b, calls, options.text),
        });
    }
  }
  stats.mergeRatio = stats.traces > 0 ? stats.used / stats.traces : 0;
}

/** Session statuses whose traces are partial: the session did not end on its own. */
export const PARTIAL_STATUSES: ReadonlySet<string> = new Set(['timeout', 'interrupted', 'aborted']);

/**
 * One session's traces, with the session-level fields filled in: its status (and whether that makes
 * the traces partial) and, for a rollout sample, its group, advantages and reward (the evaluator's
 * per-trace rewards when it gave one per trace, else the sample's reward on every trace).
 */
export function sessionTraces(
  session: Pick<SessionRow, 'id' | 'status'>,
  strategy: Strategy,
  calls: readonly CallTokens[],
  text?: TokenText,
  sample?: SampleRow,
): { traces: Trajectory[]; breaks: Break[] } {
  const result = strategy.run(calls, text);
  const perTrace = sample?.traceRewards && sample.traceRewards.length === result.traces.length ? sample.traceRewards : null;
  const versionOf = new Map(calls.map((c) => [c.requestId, c.policyVersion ?? null]));
  return {
    traces: result.traces.map((trace, index) => ({
      session_id: session.id,
      strategy: strategy.name,
      trace_index: index,
      reward: perTrace ? perTrace[index]! : (sample?.reward ?? null),
      status: session.status,
      partial: PARTIAL_STATUSES.has(session.status),
      rollout_id: sample?.rolloutId ?? null,
      task_id: sample?.taskId ?? null,
      group_id: sample?.groupId ?? null,
      advantage: sample?.advantage ?? null,
      loo_advantage: sample?.looAdvantage ?? null,
      accepted: sample?.accepted ?? null,
      ...trace,
      metadata: { ...trace.metadata, ...policyVersions(trace.request_ids, versionOf), ...taskFields(sample) },
    })),
    breaks: result.breaks,
  };
}

/**
 * What a Harbor task's verifier said beyond the one reward, for the exports: the task's name and
 * task.toml [metadata], every metric of reward.json, and the one its reward is (the harbor
 * evaluator keeps them in the sample's evaluator record).
 */
function taskFields(sample: SampleRow | undefined): Record<string, unknown> {
  const ev = sample?.evaluator;
  if (ev?.type !== 'harbor') return {};
  // reward_key: which metric the trace's reward is (harbor-rewards.ts chooseReward); null when none was.
  return { task_name: ev.task ?? null, task_metadata: ev.metadata ?? {}, rewards: ev.rewards ?? {}, reward_key: ev.reward_key ?? null };
}

/**
 * The policy versions a trace's calls were served by, in order, when the trainer announced any;
 * a trace that spans two is marked: its later tokens came from other weights than its first.
 */
function policyVersions(ids: readonly string[], versionOf: ReadonlyMap<string, string | null>): Record<string, unknown> {
  const versions: string[] = [];
  for (const id of ids) {
    const v = versionOf.get(id);
    if (v && versions[versions.length - 1] !== v) versions.push(v);
  }
  if (versions.length === 0) return {};
  return { policy_versions: [...new Set(versions)], ...(new Set(versions).size > 1 ? { spans_policy_versions: true } : {}) };
}

/**
 * A break's example, decoded: what the trace had from the point of difference (the previous call's
 * prompt and sampled ids) and what the breaking call's prompt had there instead.
 */
export function decodedAt(b: Break, calls: readonly CallTokens[], text: TokenText | undefined): { expected?: string; found?: string } {
  if (!text) return {};
  const previous = calls.find((c) => c.requestId === b.previousRequestId);
  const current = calls.find((c) => c.requestId === b.requestId);
  if (!previous || !current) return {};
  const had = [...previous.promptIds, ...previous.sampledIds];
  return {
    expected: text.decode(had.slice(b.position, b.position + 24)),
    found: text.decode(numberArray(current.promptIds.slice(b.position, b.position + 24))),
  };
}

export function emptyStats(strategy: string): ReconstructStats {
  return {
    strategy,
    sessions: 0,
    calls: 0,
    used: 0,
    excluded: [],
    traces: 0,
    mergeRatio: 0,
    tokensPerRequest: 0,
    tokensMerged: 0,
    breaks: { template: 0, retoken: 0, rewrite: 0, other: 0 },
    breakExamples: [],
    contextDrift: 0,
    prompts: { bridged: 0, full: 0, fullReasons: {}, bridgedUnmerged: [] },
  };
}

/** Bridged / full-render counts of the usable calls, and the bridged calls not merged onto their parent. */
function countPrompts(rows: readonly TokenRow[], calls: readonly CallTokens[], traces: readonly Trajectory[], out: ReconstructStats['prompts']): void {
  const used = new Set(calls.map((c) => c.requestId));
  const traceOf = new Map<string, number>();
  traces.forEach((t, i) => t.request_ids.forEach((id) => traceOf.set(id, i)));
  for (const r of rows) {
    if (!r.render || !used.has(r.id)) continue;
    if (r.render.mode === 'full') {
      out.full++;
      const reason = r.render.reason ?? 'unknown';
      out.fullReasons[reason] = (out.fullReasons[reason] ?? 0) + 1;
      continue;
    }
    out.bridged++;
    const parent = r.render.parentCallId;
    if (!parent || traceOf.get(parent) === undefined || traceOf.get(parent) !== traceOf.get(r.id)) out.bridgedUnmerged.push(r.id);
  }
}

/** A session's call as read with its token data: JS arrays (requests.tokens) or typed views (requests.tokenViews). */
export type TokenRow = CallTokenRow | CallTokenViews;

/** A usable call, its ids and logprobs held as its row holds them. */
export type UsableCall<R extends TokenRow> = CallTokens & {
  promptIds: NonNullable<R['promptIds']>;
  sampledIds: NonNullable<R['sampledIds']>;
  logprobs: R['logprobs'];
};

/**
 * The calls a trainer may learn from: successful, with the server's ids, and (unless asked) not
 * side traffic — a call that offered no tools while its agent's other calls did (titles, summaries).
 */
export function usableCalls<R extends TokenRow>(
  rows: readonly R[],
  includeSideCalls: boolean,
  stats: Pick<ReconstructStats, 'calls' | 'used' | 'excluded' | 'tokensPerRequest'>,
  sampling: OnPolicyOptions = {},
): UsableCall<R>[] {
  stats.calls += rows.length;
  const agentsWithTools = new Set(rows.filter((r) => r.toolCount > 0).map((r) => r.agentId));
  const calls: UsableCall<R>[] = [];
  for (const r of rows) {
    const reason =
      r.status !== 'ok'
        ? `status ${r.status}`
        : r.tokenSource !== 'upstream' || !r.promptIds || !r.sampledIds
          ? 'no server token ids'
          : !includeSideCalls && r.toolCount === 0 && agentsWithTools.has(r.agentId)
            ? 'side call (no tools offered)'
            : offPolicyExclusion(r, sampling);
    if (reason) {
      stats.excluded.push({ requestId: r.id, reason });
      continue;
    }
    stats.used++;
    stats.tokensPerRequest += r.promptIds!.length + r.sampledIds!.length;
    calls.push({
      requestId: r.id,
      agentId: r.agentId,
      seq: r.seq,
      promptIds: r.promptIds! as NonNullable<R['promptIds']>,
      sampledIds: r.sampledIds! as NonNullable<R['sampledIds']>,
      logprobs: r.logprobs as R['logprobs'],
      finishReason: r.finishReason,
      policyVersion: r.policyVersion,
    });
  }
  return calls;
}

/**
 * Why a call's tokens stay out of the loss because they were not sampled with the run's parameters
 * (a pass-through call that set its own sampling or template, or a pair other than the run's), or
 * null. Its tokens still reach later calls' prompts as context; only its own sampled ids are not
 * trained on. `--include-off-policy` keeps it.
 */
function offPolicyExclusion(r: TokenRow, sampling: OnPolicyOptions): string | null {
  if (sampling.includeOffPolicy) return null;
  const why = offPolicyReason(r.sampling ?? null, sampling.run);
  return why ? `${OFF_POLICY_PREFIX}: ${why} (--include-off-policy keeps it)` : null;
}

/** How an exclusion for sampling reads (exports count these under their own kind). */
export const OFF_POLICY_PREFIX = "not sampled with the run's parameters";
