import { PolarError } from '../core/errors.js';
import { tokenProblems, type CapturedTokens } from '../core/tokens.js';
import { scrubSecrets } from '../store/redact.js';
import type { RequestEnd, RequestStart } from '../store/requests.js';
import type { Store } from '../store/store.js';
import type { CallContext } from '../upstream/types.js';

export interface CallSummary {
  id: string;
  sessionId: string;
  agentId: string;
  seq: number;
  provider: string;
  path: string;
  status: RequestEnd['status'];
  httpStatus: number | null;
  streamed: boolean;
  promptTokens: number | null;
  sampledTokens: number | null;
  durationMs: number;
  error: string | null;
}

/**
 * One call's row, from arrival to the last byte. A small row is inserted when the call is
 * understood (it takes the sequence number, and a crash mid-generation leaves an `in_progress`
 * row, not nothing). The request bodies are written next, on the event-loop turn after the
 * upstream request went out, so that 100 KB write overlaps generation instead of adding to the
 * call's latency. Outcome, reply and tokens are written in one UPDATE (with the bodies, if they
 * are still pending) before the reply's last byte is released. Secret values seen in the request headers are
 * scrubbed from every text written.
 */
export class CallRecord {
  private seq = 0;
  private begun = false;
  private ended = false;
  private bodiesWritten = false;

  constructor(
    private readonly store: Store,
    private readonly start: RequestStart,
    private readonly secrets: readonly string[],
    private readonly onEnd?: (summary: CallSummary) => void,
  ) {}

  get id(): string {
    return this.start.id;
  }

  /** For calls whose API is known only once the body is read (a POST to an unknown path). */
  setProvider(provider: string): void {
    if (!this.begun) this.start.provider = provider;
  }

  /** The call as upstreams see it: its id, session and agent. */
  get context(): CallContext {
    return { id: this.start.id, sessionId: this.start.sessionId, agentId: this.start.agentId };
  }

  get startedAt(): number {
    return this.start.startedAt;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  begin(fields: Partial<Pick<RequestStart, 'originalRequest' | 'upstreamRequest' | 'requestedModel' | 'servedModel' | 'streamed' | 'render' | 'toolCount'>>): void {
    if (this.begun) return;
    Object.assign(this.start, fields);
    this.seq = this.store.requests.begin(this.start);
    this.begun = true;
  }

  /** Writes the request bodies on the next turn of the event loop (after the upstream send). */
  writeBodiesSoon(): void {
    setImmediate(() => {
      if (this.ended || this.bodiesWritten || !this.begun) return;
      try {
        this.store.requests.writeBodies(this.start.id, this.bodies());
        this.bodiesWritten = true;
      } catch {
        // left for end(), which writes them in its own transaction and reports a failure
      }
    });
  }

  private bodies() {
    return {
      originalRequest: this.scrub(this.start.originalRequest),
      upstreamRequest: this.scrub(this.start.upstreamRequest),
    };
  }

  /**
   * Writes what a streaming call has received so far, so a crash keeps it (the row is marked
   * `interrupted` later). Best effort: a failed checkpoint never disturbs the reply.
   */
  checkpoint(tokens: CapturedTokens, reply: string): void {
    if (!this.begun || this.ended) return;
    try {
      this.store.requests.checkpoint(this.start.id, tokens, this.scrub(reply) ?? '');
    } catch {
      // the final write reports store failures; a missed checkpoint only loses crash coverage
    }
  }

  /** Completes the row; throws PolarError('POLAR_STORE_WRITE') when the database refuses. */
  end(end: Omit<RequestEnd, 'endedAt' | 'tokenError'> & { usageCounts?: { promptTokens?: number; completionTokens?: number } }): void {
    if (this.ended) return;
    const tokens: CapturedTokens | undefined = end.tokens;
    const problems = tokens ? tokenProblems(tokens, end.usageCounts) : [];
    const { usageCounts: _ignored, ...rest } = end;
    try {
      if (!this.begun) this.begin({});
      this.store.requests.end(
        this.start.id,
        {
          ...rest,
          reply: this.scrub(end.reply),
          // Serialised here so it is scrubbed like every other text: a reply may echo a key.
          assistantMessage: end.assistantMessage === undefined || end.assistantMessage === null ? null : this.scrub(JSON.stringify(end.assistantMessage)),
          error: this.scrub(end.error ?? null),
          endedAt: Date.now(),
          tokenError: problems.length > 0 ? problems.join('; ') : null,
        },
        this.bodiesWritten ? undefined : this.bodies(),
      );
    } catch (err) {
      throw new PolarError('POLAR_STORE_WRITE', `could not record the call: ${(err as Error).message}`, 500, { cause: err });
    }
    this.ended = true;
    this.onEnd?.({
      id: this.start.id,
      sessionId: this.start.sessionId,
      agentId: this.start.agentId,
      seq: this.seq,
      provider: this.start.provider,
      path: this.start.path,
      status: end.status,
      httpStatus: end.httpStatus,
      streamed: this.start.streamed,
      promptTokens: tokens?.promptIds?.length ?? null,
      sampledTokens: tokens?.sampledIds?.length ?? null,
      durationMs: Date.now() - this.start.startedAt,
      error: end.error ?? null,
    });
  }

  private scrub(text: string | null): string | null {
    return text && this.secrets.length > 0 ? scrubSecrets(text, this.secrets) : text;
  }
}
