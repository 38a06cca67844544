import type { RequestSummary } from '../store/requests.js';
import type { GroupRow, SampleRow } from '../store/rollouts.js';
import type { SessionSummary } from '../store/sessions.js';
import type { Store } from '../store/store.js';
import { commonPrefixLength } from '../core/tokens.js';
import { decodedAt, emptyStats, sessionTraces, usableCalls } from '../trajectory/reconstruct.js';
import { prefixMerging } from '../trajectory/strategies/prefix-merging.js';
import type { Break, TokenText, Trajectory } from '../trajectory/types.js';

/** One recorded call as the browser and the report show it. */
export interface InspectCall extends RequestSummary {
  promptIds: number[] | null;
  sampledIds: number[] | null;
  logprobs: number[] | null;
  /** Why no trace holds it (failed, no server ids, side call), or null when one does. */
  excluded: string | null;
  /** The prefix-merged trace that holds it. */
  trace: number | null;
  /** Prompt tokens shared with the agent's previous call (the rest is what this call added). */
  sharedPrefix: number;
}

export interface InspectAgent {
  id: string;
  calls: InspectCall[];
}

export interface InspectBreak extends Break {
  /** Decoded around the first differing token, with a tokenizer. */
  expected?: string;
  found?: string;
}

/**
 * Everything one session shows: its summary, its calls grouped by agent (main first, then
 * sub-agents in order of their first call), its prefix-merged traces with the breaks between them,
 * and its rollout sample and group when it was one.
 */
export interface SessionModel {
  session: SessionSummary;
  agents: InspectAgent[];
  traces: Trajectory[];
  breaks: InspectBreak[];
  sample: SampleRow | null;
  group: GroupRow | null;
}

export function loadSessionModel(store: Store, sessionId: string, text?: TokenText): SessionModel | undefined {
  const session = store.sessions.summary(sessionId);
  if (!session) return undefined;
  const summaries = new Map(store.requests.list(sessionId).map((s) => [s.id, s]));
  const rows = store.requests.tokens(sessionId);
  const stats = emptyStats(prefixMerging.name);
  const usable = usableCalls(rows, false, stats);
  const sample = store.rollouts.sampleForSession(sessionId) ?? null;
  const { traces, breaks } = sessionTraces(session, prefixMerging, usable, text, sample ?? undefined);
  const traceOf = new Map<string, number>();
  traces.forEach((t, i) => t.request_ids.forEach((id) => traceOf.set(id, i)));
  const excluded = new Map(stats.excluded.map((e) => [e.requestId, e.reason]));

  const agents = new Map<string, InspectCall[]>();
  const previousPrompt = new Map<string, readonly number[]>();
  for (const row of rows) {
    const summary = summaries.get(row.id);
    if (!summary) continue;
    const before = previousPrompt.get(row.agentId);
    const sharedPrefix = before && row.promptIds ? commonPrefixLength(before, row.promptIds) : 0;
    if (row.promptIds) previousPrompt.set(row.agentId, row.promptIds);
    const call: InspectCall = {
      ...summary,
      promptIds: row.promptIds,
      sampledIds: row.sampledIds,
      logprobs: row.logprobs,
      excluded: excluded.get(row.id) ?? null,
      trace: traceOf.get(row.id) ?? null,
      sharedPrefix,
    };
    const list = agents.get(row.agentId) ?? [];
    list.push(call);
    agents.set(row.agentId, list);
  }
  const order = [...agents.keys()].sort((a, b) => (a === 'main' ? -1 : b === 'main' ? 1 : 0));
  const group = sample ? (store.rollouts.groups(sample.rolloutId).find((g) => g.groupId === sample.groupId) ?? null) : null;
  return {
    session,
    agents: order.map((id) => ({ id, calls: agents.get(id)! })),
    traces,
    breaks: breaks.map((b) => ({ ...b, ...decodedAt(b, usable, text) })),
    sample,
    group,
  };
}

/** All calls in sequence order. */
export function allCalls(model: SessionModel): InspectCall[] {
  return model.agents.flatMap((a) => a.calls).sort((a, b) => a.seq - b.seq);
}

/** The break that started a trace (its first call could not extend an earlier one), if any. */
export function breakBefore(model: SessionModel, trace: Trajectory): InspectBreak | undefined {
  return model.breaks.find((b) => b.requestId === trace.request_ids[0]);
}

export function seqOf(model: SessionModel, requestId: string): number | null {
  for (const a of model.agents) for (const c of a.calls) if (c.id === requestId) return c.seq;
  return null;
}
