import type { ChainEntry } from './bridge.js';

/**
 * The calls a proxy can still continue, per session and agent (sub-agents have their own chains).
 * A call is remembered only once its reply reached the harness. Bounded: the newest calls of each
 * agent (a harness continues its latest turn, or retries one just before it) and the most recently
 * active agents; a session beyond that starts again with a full render, which is recorded.
 */
export class ChainMemory {
  private readonly chains = new Map<string, ChainEntry[]>();

  constructor(
    private readonly perAgent = 16,
    private readonly agents = 4096,
  ) {}

  /** Newest first. */
  entries(sessionId: string, agentId: string): readonly ChainEntry[] {
    return this.chains.get(key(sessionId, agentId)) ?? [];
  }

  remember(sessionId: string, agentId: string, entry: ChainEntry): void {
    const k = key(sessionId, agentId);
    const chain = this.chains.get(k) ?? [];
    this.chains.delete(k); // re-inserted: Map order is recency
    chain.unshift(entry);
    if (chain.length > this.perAgent) chain.length = this.perAgent;
    this.chains.set(k, chain);
    if (this.chains.size > this.agents) this.chains.delete(this.chains.keys().next().value!);
  }

  /** Drops a session's chains (the session ended). */
  forget(sessionId: string): void {
    for (const k of [...this.chains.keys()]) if (k.startsWith(`${sessionId}\0`)) this.chains.delete(k);
  }
}

function key(sessionId: string, agentId: string): string {
  return `${sessionId}\0${agentId}`;
}
