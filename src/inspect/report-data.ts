import type { ChatMessage } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { lookupResponse } from '../proxy/recorded-response.js';
import type { GroupRow, RolloutRow, SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import { callConversation, isConversation } from '../trajectory/conversation.js';
import type { TokenText } from '../trajectory/types.js';
import { allCalls, loadSessionModel, type SessionModel } from './session-model.js';

/** One session of a report: its model, and the conversation its main agent last sent with the reply it got. */
export interface ReportSession {
  model: SessionModel;
  /** The call the conversation is taken from (the main agent's last successful call). */
  conversationCall: number | null;
  messages: ChatMessage[];
  reply: ChatMessage | null;
  /** Why there is no conversation, when there is none. */
  problem: string | null;
}

export interface ReportRollout {
  rollout: RolloutRow;
  groups: GroupRow[];
  samples: SampleRow[];
}

export interface ReportData {
  sessions: ReportSession[];
  rollout: ReportRollout | null;
}

/** What `polar report` shows, read from the store: one session, or every session of one rollout. */
export function loadReport(store: Store, target: { session?: string; rollout?: string }, text?: TokenText): ReportData {
  if (target.rollout) {
    const rollout = store.rollouts.get(target.rollout);
    if (!rollout) throw new PolarError('POLAR_USAGE', `no rollout ${JSON.stringify(target.rollout)} in this database; list them with \`polar rollouts\``);
    const samples = store.rollouts.samples(rollout.id);
    const sessions = samples.flatMap((s) => (s.sessionId ? [reportSession(store, s.sessionId, text)] : [])).filter((s): s is ReportSession => s !== null);
    return { sessions, rollout: { rollout, groups: store.rollouts.groups(rollout.id), samples } };
  }
  const id = target.session!;
  const session = reportSession(store, id, text);
  if (!session) throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(id)} in this database; list them with \`polar sessions\``);
  return { sessions: [session], rollout: null };
}

function reportSession(store: Store, id: string, text: TokenText | undefined): ReportSession | null {
  const model = loadSessionModel(store, id, text);
  if (!model) return null;
  const calls = allCalls(model);
  const ok = calls.filter((c) => c.status === 'ok');
  const pick = [...ok].reverse().find((c) => c.agentId === 'main' && !c.excluded) ?? ok[ok.length - 1] ?? calls[calls.length - 1];
  if (!pick) return { model, conversationCall: null, messages: [], reply: null, problem: 'no calls were recorded' };
  const row = store.requests.get(pick.id)!;
  const conversation = callConversation(row, (responseId, sessionId) => lookupResponse(store, responseId, sessionId));
  if (!isConversation(conversation)) return { model, conversationCall: pick.seq, messages: [], reply: null, problem: conversation.problem };
  return { model, conversationCall: pick.seq, messages: conversation.messages, reply: (row.assistantMessage as ChatMessage | null) ?? null, problem: null };
}
