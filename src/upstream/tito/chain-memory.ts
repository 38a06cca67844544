import type { CanonicalRequest, ChatMessage } from '../../core/chat.js';
import type { CallContext, CallOutcome } from '../types.js';
import { contextKey, findParent, messageKeys, type ChainEntry, type ParentSearch } from './bridge.js';

/** What a call is remembered by once it is over: its messages' key and count, its context key. */
export interface ChainMark {
  messagesKey: string;
  messageCount: number;
  contextKey: string;
}

/**
 * The calls a proxy can still continue, per session and agent (sub-agents have their own chains).
 * A call is remembered only once its reply reached the harness. Bounded two ways: the newest calls
 * of each agent (a harness continues its latest turn, or retries one just before it), and a budget
 * of token ids held in all (each entry holds its full prompt), spent on the most recently active
 * agents. A chain pushed out starts again with a full render, which is recorded with its reason.
 */
export class ChainMemory {
  private readonly chains = new Map<string, ChainEntry[]>();
  /** Chains dropped for the budget (bounded), so their next call is not mistaken for a first one. */
  private readonly dropped = new Set<string>();
  private held = 0;

  constructor(
    private readonly perAgent = 4,
    /** Token ids kept in all, as Uint32Array: 32 M ids is 128 MB. */
    private readonly budget = 32_000_000,
  ) {}

  /** Whether this agent's chain was dropped to stay within the budget. */
  wasDropped(sessionId: string, agentId: string): boolean {
    return this.dropped.has(key(sessionId, agentId));
  }

  /**
   * The earlier call this request continues (bridge.ts findParent over this agent's chain; a chain
   * dropped for the budget is `chain-evicted`, not `first-call`), and the mark to remember it by.
   * `enabled: false` searches nothing (every call a first call).
   */
  locate(
    call: CallContext,
    messages: readonly ChatMessage[],
    tools: readonly unknown[] | undefined,
    kwargs: Record<string, unknown>,
    enabled = true,
  ): { search: ParentSearch; mark: ChainMark } {
    const keys = messageKeys(messages);
    const context = contextKey(tools, kwargs);
    let search = findParent(messages, keys, context, enabled ? this.entries(call.sessionId, call.agentId) : []);
    if (!search.parent && search.reason === 'first-call' && this.wasDropped(call.sessionId, call.agentId)) search = { parent: null, reason: 'chain-evicted' };
    return { search, mark: { messagesKey: keys[keys.length - 1]!, messageCount: messages.length, contextKey: context } };
  }

  /** A call is over: remembered when its reply reached the harness whole, with the server's ids. */
  settle(call: CallContext, mark: ChainMark, outcome: CallOutcome | null): void {
    const { promptIds, sampledIds, logprobs } = outcome?.tokens ?? {};
    if (!outcome || !promptIds || !sampledIds) return;
    this.remember(call.sessionId, call.agentId, { callId: call.id, ...mark, promptIds, sampledIds, logprobs, reply: outcome.reply });
  }

  /** Newest first. */
  entries(sessionId: string, agentId: string): readonly ChainEntry[] {
    return this.chains.get(key(sessionId, agentId)) ?? [];
  }

  /** Token ids held now. */
  get size(): number {
    return this.held;
  }

  /** Keeps a copy of the entry's ids as Uint32Array. */
  remember(sessionId: string, agentId: string, given: ChainEntry): void {
    const entry: ChainEntry = { ...given, promptIds: Uint32Array.from(given.promptIds), sampledIds: Uint32Array.from(given.sampledIds) };
    const k = key(sessionId, agentId);
    const chain = this.chains.get(k) ?? [];
    this.chains.delete(k); // re-inserted last: Map order is recency
    this.dropped.delete(k);
    chain.unshift(entry);
    this.held += weight(entry);
    while (chain.length > this.perAgent) this.held -= weight(chain.pop()!);
    this.chains.set(k, chain);
    for (const [oldest, dropped] of this.chains) {
      if (this.held <= this.budget || oldest === k) break;
      this.chains.delete(oldest);
      for (const e of dropped) this.held -= weight(e);
      this.dropped.add(oldest);
      if (this.dropped.size > 65_536) this.dropped.delete(this.dropped.values().next().value!);
    }
  }

  /** Drops a session's chains (the session ended). */
  forget(sessionId: string): void {
    for (const [k, chain] of [...this.chains]) {
      if (!k.startsWith(`${sessionId}\0`)) continue;
      this.chains.delete(k);
      for (const e of chain) this.held -= weight(e);
    }
  }
}

/** Template switches: the request's own `chat_template_kwargs`, and the harness's thinking switch. */
export function templateKwargs(req: CanonicalRequest): Record<string, unknown> {
  const own = req.body.chat_template_kwargs;
  const kwargs: Record<string, unknown> = own && typeof own === 'object' ? { ...(own as Record<string, unknown>) } : {};
  if (req.thinking !== undefined) kwargs.enable_thinking = req.thinking;
  return kwargs;
}

function key(sessionId: string, agentId: string): string {
  return `${sessionId}\0${agentId}`;
}

function weight(e: ChainEntry): number {
  return e.promptIds.length + e.sampledIds.length;
}
