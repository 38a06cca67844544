import { numberArray, type CapturedTokens, type TokenSource } from '../core/tokens.js';
import type { Db } from './db.js';
import { tokenDigest } from '../core/token-digest.js';
import { ChainReader, RecentCalls, type BodyKind, type CallKey, type HeldBody } from './call-chains.js';
import type { BodyText } from './delta.js';
import { resolvePrompts } from './delta-read.js';
import { float64View, packFloat64, packUint32, unpackFloat64, unpackUint32 } from '../core/token-packing.js';
import type { SamplingRecord } from '../upstream/sampling-policy.js';

/** `interrupted`: the process serving it ended first (see owners.ts); tokens checkpointed so far are kept. */
export type RequestStatus = 'in_progress' | 'ok' | 'error' | 'aborted' | 'interrupted';

/** What is known when a call arrives. */
export interface RequestStart {
  id: string;
  sessionId: string;
  agentId: string;
  provider: string;
  method: string;
  path: string;
  startedAt: number;
  streamed: boolean;
  requestHeaders: Record<string, string>;
  originalRequest: BodyText | null;
  upstreamRequest: BodyText | null;
  requestedModel: string | null;
  servedModel: string | null;
  /** How the prompt was built, where polar built or pinned it (see migration 3). */
  render?: PromptRenderRecord | null;
  /** Tools the call offered. */
  toolCount?: number | null;
  /** The policy version the proxy was serving when the call arrived (set by the trainer). */
  policyVersion?: string | null;
  /** What it was sampled with, as sent upstream, and by whose choice (migration 11). */
  sampling?: SamplingRecord | null;
}

export interface PromptRenderRecord {
  mode: 'bridged' | 'full';
  parentCallId: string | null;
  reason: string | null;
  renderedTokens: number | null;
}

/** What is known when it ends, successfully or not. */
export interface RequestEnd {
  endedAt: number;
  status: Exclude<RequestStatus, 'in_progress' | 'interrupted'>;
  httpStatus: number | null;
  /** As sent: text, or its UTF-8 bytes (a streamed reply, kept as the bytes that went out), stored as TEXT either way. */
  reply: BodyText | null;
  error?: string | null;
  errorCode?: string | null;
  finishReason?: string | null;
  usage?: unknown;
  servedModel?: string | null;
  tokens?: CapturedTokens;
  tokenError?: string | null;
  /** The reply as a canonical assistant message (content, reasoning_content, tool_calls), or its JSON text. */
  assistantMessage?: unknown;
}

export type RequestBodies = Pick<RequestStart, 'originalRequest' | 'upstreamRequest'>;

export interface RequestSummary {
  id: string;
  sessionId: string;
  agentId: string;
  seq: number;
  provider: string;
  method: string;
  path: string;
  startedAt: number;
  endedAt: number | null;
  status: RequestStatus;
  httpStatus: number | null;
  streamed: boolean;
  error: string | null;
  errorCode: string | null;
  finishReason: string | null;
  requestedModel: string | null;
  servedModel: string | null;
  tokenSource: TokenSource;
  promptTokenCount: number | null;
  sampledTokenCount: number | null;
  tokenError: string | null;
  render: PromptRenderRecord | null;
  policyVersion: string | null;
  /** What the call was sampled with (null for calls recorded before migration 11). */
  sampling?: SamplingRecord | null;
}

export interface RequestRecord extends RequestSummary {
  requestHeaders: Record<string, string>;
  originalRequest: string | null;
  upstreamRequest: string | null;
  reply: string | null;
  usage: unknown;
  assistantMessage: unknown;
  promptIds: number[] | null;
  sampledIds: number[] | null;
  logprobs: number[] | null;
  tokenDigest: string | null;
}

const SUMMARY_COLUMNS = `id, session_id, agent_id, seq, provider, method, path, started_at, ended_at, status,
  http_status, streamed, error, error_code, finish_reason, requested_model, served_model, token_source,
  prompt_token_count, sampled_token_count, token_error, prompt_render, parent_call_id, render_reason, rendered_tokens, policy_version, sampling`;

const END_COLUMNS = {
  ended_at: '@endedAt',
  status: '@status',
  http_status: '@httpStatus',
  reply: 'CAST(@reply AS TEXT)',
  error: '@error',
  error_code: '@errorCode',
  finish_reason: '@finishReason',
  usage: '@usage',
  served_model: 'COALESCE(@servedModel, served_model)',
  token_source: '@tokenSource',
  prompt_ids: '@promptIds',
  prompt_base: '@promptBase',
  prompt_base_len: '@promptBaseLen',
  sampled_ids: '@sampledIds',
  logprobs: '@logprobs',
  token_digest: '@tokenDigest',
  prompt_token_count: '@promptTokenCount',
  sampled_token_count: '@sampledTokenCount',
  token_error: '@tokenError',
  assistant_message: '@assistantMessage',
};

/**
 * Prepared statements over `requests` and `request_bodies`. The sequence number is allocated inside
 * the INSERT, under SQLite's write lock, so it is monotonic per session even with several polar
 * processes on one file. A call is written in up to three steps, each one statement: `begin` (a
 * small row), `writeBodies` (the two request texts, ideally while the upstream generates) and
 * `end` (outcome, reply and tokens; the bodies too, if not yet written, in the same transaction).
 */
export class RequestsTable {
  private readonly beginStmt;
  private readonly bodiesStmt;
  private readonly endStmt;
  private readonly listStmt;
  private readonly getStmt;
  private readonly endWithBodies;
  private readonly beginAndBodies;
  private readonly tokensStmt;
  private readonly checkpointStmt;
  private readonly toolCountStmt;
  private readonly keyStmt;
  private readonly chains: ChainReader;
  /** What the next call of each agent is stored against (call-chains.ts). */
  private readonly recent = new RecentCalls();
  /** Calls begun here whose tool count was not given, so the upstream body must say. */
  private readonly toolCountUnknown = new Set<string>();

  constructor(
    db: Db,
    private readonly ownerId: number | null = null,
  ) {
    this.beginStmt = db.prepare(
      `INSERT INTO requests (id, session_id, agent_id, seq, provider, method, path, started_at, streamed,
                             request_headers, requested_model, served_model,
                             prompt_render, parent_call_id, render_reason, rendered_tokens, tool_count, owner_id, policy_version, sampling)
       VALUES (@id, @sessionId, @agentId,
               (SELECT COALESCE(MAX(seq), 0) + 1 FROM requests WHERE session_id = @sessionId),
               @provider, @method, @path, @startedAt, @streamed,
               @requestHeaders, @requestedModel, @servedModel,
               @promptRender, @parentCallId, @renderReason, @renderedTokens, @toolCount, @ownerId, @policyVersion, @sampling)
       RETURNING seq`,
    );
    this.checkpointStmt = db.prepare(
      `UPDATE requests SET token_source = @tokenSource, prompt_ids = @promptIds, prompt_base = @promptBase, prompt_base_len = @promptBaseLen,
                           sampled_ids = @sampledIds, logprobs = @logprobs, token_digest = @tokenDigest,
                           prompt_token_count = @promptTokenCount, sampled_token_count = @sampledTokenCount, reply = CAST(@reply AS TEXT)
        WHERE id = @id AND status = 'in_progress'`,
    );
    this.endStmt = db.prepare(
      `UPDATE requests SET ${Object.entries(END_COLUMNS)
        .map(([col, expr]) => `${col} = ${expr}`)
        .join(', ')} WHERE id = @id`,
    );
    const bodyColumns = [
      'original_request',
      'original_base',
      'original_prefix',
      'original_suffix',
      'upstream_request',
      'upstream_base',
      'upstream_prefix',
      'upstream_suffix',
    ];
    this.bodiesStmt = db.prepare(
      // A body given as bytes is bound as a BLOB and stored as TEXT with the same bytes (the
      // database is UTF-8): no decoding on the write path.
      `INSERT INTO request_bodies (request_id, ${bodyColumns.join(', ')}) VALUES (?, ${bodyColumns.map((c) => (c.endsWith('_request') ? 'CAST(? AS TEXT)' : '?')).join(', ')})
       ON CONFLICT (request_id) DO UPDATE SET ${bodyColumns.map((c) => `${c} = excluded.${c}`).join(', ')}`,
    );
    this.toolCountStmt = db.prepare(
      `UPDATE requests SET tool_count = json_array_length(CAST(@text AS TEXT), '$.tools') WHERE id = @id AND tool_count IS NULL AND json_valid(CAST(@text AS TEXT))`,
    );
    this.keyStmt = db.prepare(`SELECT session_id AS sessionId, agent_id AS agentId FROM requests WHERE id = ?`);
    this.listStmt = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM requests WHERE session_id = ? ORDER BY seq`);
    this.getStmt = db.prepare(`SELECT * FROM requests WHERE id = ?`);
    this.tokensStmt = db.prepare(
      `SELECT id, agent_id, seq, status, token_source, prompt_ids, prompt_base, prompt_base_len, sampled_ids, logprobs, token_digest, finish_reason, usage,
              prompt_render, parent_call_id, render_reason, policy_version, sampling, COALESCE(tool_count, 0) AS tool_count
         FROM requests WHERE session_id = ? ORDER BY seq`,
    );
    this.endWithBodies = db.transaction((id: string, end: RequestEnd, bodies: RequestBodies) => {
      const remember = this.storeBodies(id, bodies);
      return [remember, this.storeEnd(id, end)] as const;
    });
    this.beginAndBodies = db.transaction((start: Omit<RequestStart, 'originalRequest' | 'upstreamRequest'>, bodies: RequestBodies) => {
      const seq = this.begin(start);
      return [seq, this.storeBodies(start.id, bodies)] as const;
    });
    this.chains = new ChainReader(db);
  }

  /** Records that a call started; returns its sequence number within the session. */
  begin(start: Omit<RequestStart, 'originalRequest' | 'upstreamRequest'>): number {
    // all(), not get(): with RETURNING, get() stops at the first row and the autocommit's COMMIT
    // runs at the statement's reset, whose error better-sqlite3 drops: on a full disk the row
    // was rolled back while begin() reported success (and the call's end failed on its key).
    const [row] = this.beginStmt.all({
      id: start.id,
      sessionId: start.sessionId,
      agentId: start.agentId,
      provider: start.provider,
      method: start.method,
      path: start.path,
      startedAt: start.startedAt,
      streamed: start.streamed ? 1 : 0,
      requestHeaders: JSON.stringify(start.requestHeaders),
      requestedModel: start.requestedModel,
      servedModel: start.servedModel,
      promptRender: start.render?.mode ?? null,
      parentCallId: start.render?.parentCallId ?? null,
      renderReason: start.render?.reason ?? null,
      renderedTokens: start.render?.renderedTokens ?? null,
      toolCount: start.toolCount ?? null,
      ownerId: this.ownerId,
      policyVersion: start.policyVersion ?? null,
      sampling: start.sampling ? JSON.stringify(start.sampling) : null,
    }) as { seq: number }[];
    this.recent.register(start.id, { sessionId: start.sessionId, agentId: start.agentId });
    if (start.toolCount === undefined || start.toolCount === null) this.toolCountUnknown.add(start.id);
    return row!.seq;
  }

  /** begin() and writeBodies() in one transaction: one commit instead of two. */
  beginWithBodies(start: Omit<RequestStart, 'originalRequest' | 'upstreamRequest'>, bodies: RequestBodies): number {
    const [seq, remember] = this.beginAndBodies(start, bodies);
    remember();
    return seq;
  }

  /** Writes a call's two request bodies, each as a delta against its agent's previous body where they share enough. */
  writeBodies(id: string, bodies: RequestBodies): void {
    this.storeBodies(id, bodies)();
  }

  /** Writes the bodies; returns what to remember once the write is committed. */
  private storeBodies(id: string, bodies: RequestBodies): () => void {
    const key = this.keyOf(id);
    const original: HeldBody | null = bodies.originalRequest === null ? null : { body: bodies.originalRequest };
    const upstream: HeldBody | null = bodies.upstreamRequest === null ? null : { body: bodies.upstreamRequest };
    const part = (kind: BodyKind, held: HeldBody | null) => {
      const d = held === null ? null : this.recent.bodyDelta(key, kind, held);
      return d ? [d.middle, d.base, d.prefix, d.suffix] : [held?.body ?? null, null, null, null];
    };
    this.bodiesStmt.run(id, ...part('original', original), ...part('upstream', upstream));
    if (this.toolCountUnknown.delete(id) && bodies.upstreamRequest) this.toolCountStmt.run({ text: bodies.upstreamRequest, id });
    return () => this.recent.rememberBodies(key, id, original, upstream);
  }

  private keyOf(id: string): CallKey | undefined {
    return this.recent.keyOf(id) ?? (this.keyStmt.get(id) as CallKey | undefined);
  }

  /** The token columns of a call: its prompt as a delta against its agent's previous call where possible. */
  private tokenColumns(id: string, tokens: CapturedTokens | undefined) {
    const key = this.keyOf(id);
    const prompt = tokens?.promptIds ? this.recent.promptDelta(key, tokens.promptIds) : null;
    const promptIds = tokens?.promptIds ? packUint32(tokens.promptIds) : null;
    const sampledIds = tokens?.sampledIds ? packUint32(tokens.sampledIds) : null;
    const logprobs = tokens?.logprobs ? packFloat64(tokens.logprobs) : null;
    return {
      key,
      columns: {
        tokenSource: tokens?.source ?? 'none',
        promptIds: prompt?.base ? packUint32(prompt.suffix) : promptIds,
        promptBase: prompt?.base ?? null,
        promptBaseLen: prompt?.baseLength ?? null,
        sampledIds,
        logprobs,
        promptTokenCount: tokens?.promptIds?.length ?? null,
        sampledTokenCount: tokens?.sampledIds?.length ?? null,
        // Over the whole arrays, as the upstream sent them, whatever part of them the row stores.
        tokenDigest: promptIds || sampledIds || logprobs ? tokenDigest(promptIds, sampledIds, logprobs) : null,
      },
    };
  }

  /**
   * What a streaming call has received so far (tokens and the reply text the harness was sent),
   * written while it is still in progress: if the process dies, the row keeps them and is later
   * marked `interrupted` (owners.ts). Never trainable, since the call did not finish.
   */
  checkpoint(id: string, tokens: CapturedTokens, reply: BodyText): void {
    this.checkpointStmt.run({ id, reply, ...this.tokenColumns(id, tokens).columns });
  }

  /** Completes a call's row; with `bodies`, writes them in the same transaction. */
  end(id: string, end: RequestEnd, bodies?: RequestBodies): void {
    if (bodies) {
      const [rememberBodies, rememberTokens] = this.endWithBodies(id, end, bodies);
      rememberBodies();
      rememberTokens();
      return;
    }
    this.storeEnd(id, end)();
  }

  /** Writes the end of a call; returns what to remember once the write is committed. */
  private storeEnd(id: string, end: RequestEnd): () => void {
    const tokens = end.tokens;
    const { key, columns } = this.tokenColumns(id, tokens);
    this.endStmt.run({
      id,
      endedAt: end.endedAt,
      status: end.status,
      httpStatus: end.httpStatus,
      reply: end.reply,
      error: end.error ?? null,
      errorCode: end.errorCode ?? null,
      finishReason: end.finishReason ?? null,
      usage: end.usage === undefined || end.usage === null ? null : JSON.stringify(end.usage),
      servedModel: end.servedModel ?? null,
      ...columns,
      tokenError: end.tokenError ?? null,
      assistantMessage:
        end.assistantMessage === undefined || end.assistantMessage === null
          ? null
          : typeof end.assistantMessage === 'string'
            ? end.assistantMessage
            : JSON.stringify(end.assistantMessage),
    });
    return () => {
      if (tokens?.promptIds && tokens.sampledIds) this.recent.rememberSequence(key, id, tokens.promptIds, tokens.sampledIds);
    };
  }

  /** A session's calls with their token data, in sequence order; the tool count is read in SQLite. */
  tokens(sessionId: string): CallTokenRow[] {
    return this.tokenViews(sessionId).map((r) => ({
      ...r,
      promptIds: r.promptIds && numberArray(r.promptIds),
      sampledIds: r.sampledIds && numberArray(r.sampledIds),
      logprobs: r.logprobs && numberArray(r.logprobs),
    }));
  }

  /**
   * tokens() with ids and logprobs as typed arrays, for readers of every call (reconstruct, verify):
   * each chain of deltas materialised once and the stored BLOBs viewed in place (delta-read.ts).
   */
  tokenViews(sessionId: string): CallTokenViews[] {
    const raw = this.tokensStmt.all(sessionId) as RawTokenRow[];
    const ids = resolvePrompts(raw, (id) => Uint32Array.from(this.chains.sequence(id)));
    return raw.map((r, i) => this.tokenRow(r, ids[i]!.promptIds, ids[i]!.sampledIds));
  }

  private tokenRow(r: RawTokenRow, promptIds: Uint32Array | null, sampledIds: Uint32Array | null): CallTokenViews {
    return {
      id: r.id,
      agentId: r.agent_id,
      seq: r.seq,
      status: r.status,
      tokenSource: r.token_source,
      promptIds,
      sampledIds,
      logprobs: float64View(r.logprobs),
      tokenDigest: r.token_digest,
      finishReason: r.finish_reason,
      usage: r.usage ? (JSON.parse(r.usage) as CallTokenRow['usage']) : null,
      toolCount: r.tool_count,
      render: r.prompt_render ? { mode: r.prompt_render, parentCallId: r.parent_call_id, reason: r.render_reason } : null,
      policyVersion: r.policy_version,
      sampling: parseSampling(r.sampling),
    };
  }

  list(sessionId: string): RequestSummary[] {
    return (this.listStmt.all(sessionId) as RawRequest[]).map(toSummary);
  }

  get(id: string): RequestRecord | undefined {
    const raw = this.getStmt.get(id) as RawRequest | undefined;
    if (!raw) return undefined;
    return {
      ...toSummary(raw),
      requestHeaders: raw.request_headers ? (JSON.parse(raw.request_headers) as Record<string, string>) : {},
      originalRequest: this.chains.body(id, 'original'),
      upstreamRequest: this.chains.body(id, 'upstream'),
      reply: raw.reply ?? null,
      usage: raw.usage ? JSON.parse(raw.usage) : null,
      assistantMessage: raw.assistant_message ? JSON.parse(raw.assistant_message) : null,
      promptIds: this.chains.prompt(unpackUint32(raw.prompt_ids), raw.prompt_base ?? null, raw.prompt_base_len ?? null),
      sampledIds: unpackUint32(raw.sampled_ids),
      logprobs: unpackFloat64(raw.logprobs),
      tokenDigest: raw.token_digest ?? null,
    };
  }
}

export interface CallTokenRow {
  id: string;
  agentId: string;
  seq: number;
  status: RequestStatus;
  tokenSource: TokenSource;
  promptIds: number[] | null;
  sampledIds: number[] | null;
  logprobs: number[] | null;
  /** The digest taken at capture (token-digest.ts); null where no tokens were recorded. */
  tokenDigest: string | null;
  finishReason: string | null;
  usage: { prompt_tokens?: number; completion_tokens?: number } | null;
  /** Tools offered in the request sent upstream (0 for side calls such as title requests). */
  toolCount: number;
  /** How polar built the prompt, where it did (token-in/token-out and nemo-rl upstreams). */
  render: { mode: 'bridged' | 'full'; parentCallId: string | null; reason: string | null } | null;
  policyVersion: string | null;
  /** What the call was sampled with (null or absent for calls recorded before migration 11). */
  sampling?: SamplingRecord | null;
}

/** CallTokenRow with its ids and logprobs as typed arrays (tokenViews). */
export type CallTokenViews = Omit<CallTokenRow, 'promptIds' | 'sampledIds' | 'logprobs'> & {
  promptIds: Uint32Array | null;
  sampledIds: Uint32Array | null;
  logprobs: Float64Array | null;
};

interface RawTokenRow {
  id: string;
  agent_id: string;
  seq: number;
  status: RequestStatus;
  token_source: TokenSource;
  prompt_ids: Buffer | null;
  prompt_base: string | null;
  prompt_base_len: number | null;
  sampled_ids: Buffer | null;
  logprobs: Buffer | null;
  token_digest: string | null;
  finish_reason: string | null;
  usage: string | null;
  tool_count: number;
  prompt_render: 'bridged' | 'full' | null;
  parent_call_id: string | null;
  render_reason: string | null;
  policy_version: string | null;
  sampling: string | null;
}

/** The stored record, or null where there is none or it does not parse (never a reason to fail a read). */
function parseSampling(text: string | null | undefined): SamplingRecord | null {
  if (!text) return null;
  try {
    return JSON.parse(text) as SamplingRecord;
  } catch {
    return null;
  }
}

interface RawRequest {
  id: string;
  session_id: string;
  agent_id: string;
  seq: number;
  provider: string;
  method: string;
  path: string;
  started_at: number;
  ended_at: number | null;
  status: RequestStatus;
  http_status: number | null;
  streamed: number;
  error: string | null;
  error_code: string | null;
  finish_reason: string | null;
  requested_model: string | null;
  served_model: string | null;
  token_source: TokenSource;
  prompt_token_count: number | null;
  sampled_token_count: number | null;
  token_error: string | null;
  prompt_render: 'bridged' | 'full' | null;
  parent_call_id: string | null;
  render_reason: string | null;
  rendered_tokens: number | null;
  policy_version?: string | null;
  sampling?: string | null;
  request_headers?: string | null;
  original_request?: string | null;
  upstream_request?: string | null;
  reply?: string | null;
  usage?: string | null;
  assistant_message?: string | null;
  prompt_ids?: Buffer | null;
  prompt_base?: string | null;
  prompt_base_len?: number | null;
  sampled_ids?: Buffer | null;
  logprobs?: Buffer | null;
  token_digest?: string | null;
}

function toSummary(raw: RawRequest): RequestSummary {
  return {
    id: raw.id,
    sessionId: raw.session_id,
    agentId: raw.agent_id,
    seq: raw.seq,
    provider: raw.provider,
    method: raw.method,
    path: raw.path,
    startedAt: raw.started_at,
    endedAt: raw.ended_at,
    status: raw.status,
    httpStatus: raw.http_status,
    streamed: raw.streamed === 1,
    error: raw.error,
    errorCode: raw.error_code,
    finishReason: raw.finish_reason,
    requestedModel: raw.requested_model,
    servedModel: raw.served_model,
    tokenSource: raw.token_source,
    promptTokenCount: raw.prompt_token_count,
    sampledTokenCount: raw.sampled_token_count,
    tokenError: raw.token_error,
    render: raw.prompt_render
      ? { mode: raw.prompt_render, parentCallId: raw.parent_call_id, reason: raw.render_reason, renderedTokens: raw.rendered_tokens }
      : null,
    policyVersion: raw.policy_version ?? null,
    sampling: parseSampling(raw.sampling),
  };
}
