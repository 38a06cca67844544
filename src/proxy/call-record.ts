import { PolarError } from '../core/errors.js';
import { tokenProblems, type CapturedTokens } from '../core/tokens.js';
import type { BodyText } from '../store/delta.js';
import { storeFileError } from '../store/file-errors.js';
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

/** Per store, the calls whose end the database refused (a full disk), in the order they failed. */
const PENDING = new WeakMap<Store, Set<CallRecord>>();

function unrecorded(store: Store): Set<CallRecord> {
  let set = PENDING.get(store);
  if (!set) PENDING.set(store, (set = new Set()));
  return set;
}

type BeginFields = Partial<
  Pick<RequestStart, 'originalRequest' | 'upstreamRequest' | 'requestedModel' | 'servedModel' | 'streamed' | 'render' | 'toolCount' | 'sampling'>
>;

/**
 * One call's row, from arrival to the last byte. The row is inserted, with the request bodies, on
 * the event-loop turn after the request went upstream (`beginSoon`): that ~100 KB write, and the
 * decoding it needs, overlap generation instead of adding to the call's latency, and a crash
 * mid-generation still leaves an `in_progress` row (the sequence number is taken then). Outcome,
 * reply and tokens are written in one UPDATE (after the row and bodies, if still pending) before
 * the reply's last byte is released. Secret values seen in the request headers are scrubbed from
 * every text written.
 */
export class CallRecord {
  private seq = 0;
  private begun = false;
  private ended = false;
  private bodiesWritten = false;
  /** The end the database refused last; written again by `writeUnrecorded`. */
  private unwritten: Parameters<CallRecord['end']>[0] | null = null;
  /** The fields `beginSoon` will write; whoever writes first (it, `end` or an error) uses them. */
  private pending: (() => BeginFields) | null = null;

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

  /** Inserts the row now; `fields` add to (and override) those a pending `beginSoon` gives. */
  begin(fields: BeginFields, withBodies = false): void {
    if (this.begun) return;
    Object.assign(this.start, this.takePending(), fields);
    try {
      this.insert(withBodies);
    } catch (err) {
      throw storeFileError(this.store.file, err) ?? err;
    }
    this.begun = true;
  }

  private insert(withBodies: boolean): void {
    if (withBodies) {
      this.seq = this.store.requests.beginWithBodies(this.start, this.bodies());
      this.bodiesWritten = true;
      // Written: the call no longer holds them while the server generates.
      this.start.originalRequest = null;
      this.start.upstreamRequest = null;
    } else {
      this.seq = this.store.requests.begin(this.start);
    }
  }

  /**
   * Inserts the row and writes the bodies on the next turn of the event loop, after the upstream
   * send; `fields` is evaluated then (it may decode the request).
   */
  beginSoon(fields: () => BeginFields): void {
    this.pending = fields;
    setImmediate(() => {
      if (this.ended || this.begun) return;
      try {
        this.begin({}, true);
      } catch {
        // left for end(), which writes them in its own transaction and reports a failure
      }
    });
  }

  /** The pending fields, evaluated once (a failed insert keeps them in `start` for the next try). */
  private takePending(): BeginFields {
    const pending = this.pending;
    this.pending = null;
    if (!pending) return {};
    try {
      return pending();
    } catch (err) {
      process.emitWarning(`polar: could not read the request for the record: ${(err as Error).message}`, { code: 'POLAR_STORE_WRITE' });
      return {};
    }
  }

  private bodies() {
    return {
      originalRequest: this.scrubBody(this.start.originalRequest),
      upstreamRequest: this.scrubBody(this.start.upstreamRequest),
    };
  }

  /** scrub() for a body that may be bytes: matched as bytes, so it is never decoded. */
  private scrubBody(body: BodyText | null): BodyText | null {
    if (body === null || typeof body === 'string') return this.scrub(body);
    if (!this.secrets.some((s) => s.length > 0 && body.includes(s, 0, 'utf8'))) return body;
    const text = body.toString('latin1');
    const scrubbed = scrubSecrets(
      text,
      this.secrets.map((s) => Buffer.from(s, 'utf8').toString('latin1')),
    );
    return scrubbed === text ? body : Buffer.from(scrubbed, 'latin1');
  }

  /**
   * Writes what a streaming call has received so far, so a crash keeps it (the row is marked
   * `interrupted` later). Best effort: a failed checkpoint never disturbs the reply.
   */
  checkpoint(tokens: CapturedTokens, reply: BodyText): void {
    if (!this.begun || this.ended) return;
    try {
      this.store.requests.checkpoint(this.start.id, tokens, this.scrubBody(reply) ?? '');
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
          reply: this.scrubBody(end.reply),
          // Serialised here so it is scrubbed like every other text: a reply may echo a key.
          assistantMessage: end.assistantMessage === undefined || end.assistantMessage === null ? null : this.scrub(JSON.stringify(end.assistantMessage)),
          error: this.scrub(end.error ?? null),
          endedAt: Date.now(),
          tokenError: problems.length > 0 ? problems.join('; ') : null,
        },
        this.bodiesWritten ? undefined : this.bodies(),
      );
    } catch (err) {
      // Kept, and written by the next call or at close: a reply that went out must not leave its
      // row in_progress once the database can be written again (a full disk freed).
      this.unwritten = end;
      unrecorded(this.store).add(this);
      const cause = err instanceof PolarError ? err : storeFileError(this.store.file, err);
      if (cause) throw new PolarError(cause.code, `could not record the call: ${cause.message}`, cause.status, { cause: err });
      throw new PolarError('POLAR_STORE_WRITE', `could not record the call: ${(err as Error).message}`, 500, { cause: err });
    }
    this.unwritten = null;
    unrecorded(this.store).delete(this);
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

  /**
   * Writes the ends the database refused (see `end`), oldest first, until one fails again; returns
   * how many are still unwritten. Cheap when there are none.
   */
  static writeUnrecorded(store: Store): number {
    const pending = PENDING.get(store);
    if (!pending || pending.size === 0) return 0;
    for (const call of [...pending]) {
      try {
        if (call.unwritten) call.end(call.unwritten);
      } catch {
        break;
      }
    }
    return pending.size;
  }

  private scrub(text: string | null): string | null {
    return text && this.secrets.length > 0 ? scrubSecrets(text, this.secrets) : text;
  }
}
