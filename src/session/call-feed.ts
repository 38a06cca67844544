import type { RequestSummary } from '../store/requests.js';
import type { Store } from '../store/store.js';

/** One finished call of a run as the database holds it, with the assistant's reply (canonical message). */
export interface RecordedCall extends RequestSummary {
  /** `{ role, content, reasoning_content?, tool_calls? }`, or null when the call produced none. */
  assistantMessage: unknown;
}

/**
 * A run's calls read back from the database once their rows are complete, each handed on once, in
 * sequence order as far as they have ended. Reading the database (not the proxy's own events) serves
 * a run through a running `polar proxy`, whose calls this process never sees, the same way.
 */
export class CallFeed {
  private readonly seen = new Set<string>();
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly session: string,
    private readonly emit: (call: RecordedCall) => void,
  ) {}

  /** Hands on the calls that ended since the last look. A failed read is left to the next one. */
  poll(): void {
    if (this.stopped) return;
    try {
      for (const row of this.store.requests.list(this.session)) {
        if (row.status === 'in_progress' || this.seen.has(row.id)) continue;
        this.seen.add(row.id);
        this.emit({ ...row, assistantMessage: this.store.requests.get(row.id)?.assistantMessage ?? null });
      }
    } catch {
      // Display only: a busy or closing database must not end the run.
    }
  }

  /** A last look (after the proxy has closed, so every call has ended), then no more. */
  finish(): void {
    this.poll();
    this.stopped = true;
  }
}
