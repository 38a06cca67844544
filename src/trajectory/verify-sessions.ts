import type { RequestRecord } from '../store/requests.js';
import type { SessionRow } from '../store/sessions.js';
import type { Store } from '../store/store.js';
import { callConversation, isConversation } from './conversation.js';
import { offPolicyReason } from '../upstream/sampling-policy.js';
import { runSampling } from './on-policy.js';
import { numberArray } from '../core/tokens.js';
import { emptyStats, sessionTraces, usableCalls } from './reconstruct.js';
import type { Strategy, TokenText, Trajectory } from './types.js';
import { verifyCall, verifyCallText, verifyCoverage, verifyDigest, verifyTrace, type CallText, type RecordedCall, type Violation } from './verify.js';

export interface VerifyOptions {
  strategy: Strategy;
  sessions?: readonly string[];
  /** Verify these traces (a trajectory file) instead of reconstructing them here. */
  traces?: readonly Trajectory[];
  allowRerender?: boolean;
  includeSideCalls?: boolean;
  /** The traces keep calls not sampled with the run's parameters (exported with --include-off-policy). */
  includeOffPolicy?: boolean;
  /** With a tokenizer, also check that ids decode to what the harness sent and received. */
  text?: TokenText;
  /** The tokenizer for one session, where `text` is not given (e.g. the one a token-in session recorded). */
  textFor?: (session: SessionRow) => TokenText | undefined;
}

export interface VerifySummary {
  sessions: number;
  calls: number;
  traces: number;
  violations: number;
  /** Sessions whose ids were also checked against their text with a tokenizer. */
  textChecked?: number;
}

/**
 * Proves, session by session, that every trainable token is a sampled token: each usable call's
 * own data is consistent, every usable call is in exactly one trace, and every trace matches the
 * recordings token for token and logprob bit for bit.
 */
export function* verifySessions(
  store: Store,
  options: VerifyOptions,
  summary: VerifySummary = { sessions: 0, calls: 0, traces: 0, violations: 0 },
): Generator<Violation, void> {
  const wanted = options.sessions ? new Set(options.sessions) : null;
  const given = options.traces ? groupBySession(options.traces) : null;
  for (const session of store.sessions.rows()) {
    if (wanted && !wanted.has(session.id)) continue;
    summary.sessions++;
    const rows = store.requests.tokenViews(session.id);
    const run = runSampling(store, session.id);
    const usable = usableCalls(rows, options.includeSideCalls === true, emptyStats(options.strategy.name), {
      includeOffPolicy: options.includeOffPolicy === true,
      run,
    });
    const usableIds = new Set(usable.map((c) => c.requestId));
    const asRecorded = (r: (typeof rows)[number]): RecordedCall => ({
      requestId: r.id,
      tokenSource: r.tokenSource,
      promptIds: r.promptIds,
      sampledIds: r.sampledIds,
      logprobs: r.logprobs,
      usage: r.usage,
      tokenDigest: r.tokenDigest,
    });
    const recorded = new Map<string, RecordedCall>(rows.filter((r) => usableIds.has(r.id)).map((r) => [r.id, asRecorded(r)]));
    summary.calls += recorded.size;
    const report = function* (violations: Violation[]) {
      summary.violations += violations.length;
      yield* violations;
    };
    // Every row with tokens, trainable or not, still holds what the upstream sent.
    for (const r of rows) yield* report(verifyDigest(session.id, asRecorded(r)));
    // A call whose tokens the trainer's distribution did not sample is not on-policy, whatever the
    // traces do with it: the session is not faithful training data as recorded.
    for (const r of rows) {
      const why = r.status === 'ok' && r.tokenSource === 'upstream' ? offPolicyReason(r.sampling ?? null, run) : null;
      if (why)
        yield* report([
          {
            session: session.id,
            requestId: r.id,
            check: 'on-policy',
            message: `not on-policy: ${why}; its tokens were not sampled with the run's parameters (exports leave them out of the loss unless --include-off-policy)`,
          },
        ]);
    }
    const text = options.text ?? options.textFor?.(session);
    if (text) summary.textChecked = (summary.textChecked ?? 0) + 1;
    for (const call of recorded.values()) {
      yield* report(verifyCall(session.id, call));
      if (text && call.promptIds && call.sampledIds) {
        const row = store.requests.get(call.requestId)!;
        yield* report(
          verifyCallText(
            session.id,
            {
              requestId: call.requestId,
              promptIds: numberArray(call.promptIds),
              sampledIds: numberArray(call.sampledIds),
              assistantMessage: row.assistantMessage as CallText['assistantMessage'],
              messages: messagesOf(row),
            },
            text,
          ),
        );
      }
    }
    const traces = given ? (given.get(session.id) ?? []) : sessionTraces(session, options.strategy, usable).traces;
    summary.traces += traces.length;
    yield* report(verifyCoverage(session.id, [...usableIds], traces));
    for (const trace of traces) yield* report(verifyTrace(trace, recorded, { allowRerender: options.allowRerender === true }));
  }
}

/** The conversation a call sent, whatever its upstream kind (conversation.ts); empty when unknown. */
function messagesOf(row: RequestRecord): CallText['messages'] {
  const conversation = callConversation(row);
  return isConversation(conversation) ? (conversation.messages as CallText['messages']) : [];
}

function groupBySession(traces: readonly Trajectory[]): Map<string, Trajectory[]> {
  const out = new Map<string, Trajectory[]>();
  for (const t of traces) {
    const list = out.get(t.session_id) ?? [];
    list.push(t);
    out.set(t.session_id, list);
  }
  return out;
}
