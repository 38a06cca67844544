import { explainStoreError } from './file-errors.js';
import type { Db } from './db.js';

/** `interrupted`: the process that ran it ended without closing it (killed, crashed); see owners.ts. */
export type SessionStatus = 'active' | 'completed' | 'failed' | 'timeout' | 'aborted' | 'interrupted';

export interface SessionFields {
  harness?: string | null;
  harnessVersion?: string | null;
  cwd?: string | null;
  upstreamUrl?: string | null;
  servedModel?: string | null;
  metadata?: Record<string, unknown>;
}

export interface SessionRow {
  id: string;
  createdAt: number;
  endedAt: number | null;
  harness: string | null;
  harnessVersion: string | null;
  cwd: string | null;
  upstreamUrl: string | null;
  servedModel: string | null;
  status: SessionStatus;
  metadata: Record<string, unknown>;
}

export interface SessionSummary extends SessionRow {
  requests: number;
  failed: number;
  promptTokens: number;
  sampledTokens: number;
  lastCallAt: number | null;
  /** Calls whose prompt polar bridged onto an earlier call / rendered in full (token-in and nemo-rl upstreams). */
  bridgedCalls: number;
  fullRenders: number;
}

interface RawSession {
  id: string;
  created_at: number;
  ended_at: number | null;
  harness: string | null;
  harness_version: string | null;
  cwd: string | null;
  upstream_url: string | null;
  served_model: string | null;
  status: SessionStatus;
  metadata: string;
}

const SUMMARY_SQL = `
  SELECT s.*,
         COUNT(r.id)                                  AS requests,
         COALESCE(SUM(r.status <> 'ok'), 0)           AS failed,
         COALESCE(SUM(r.prompt_token_count), 0)       AS prompt_tokens,
         COALESCE(SUM(r.sampled_token_count), 0)      AS sampled_tokens,
         MAX(r.started_at)                            AS last_call_at,
         COALESCE(SUM(r.prompt_render = 'bridged'), 0) AS bridged_calls,
         COALESCE(SUM(r.prompt_render = 'full'), 0)   AS full_renders
    FROM sessions s LEFT JOIN requests r ON r.session_id = s.id`;

/** Prepared statements over `sessions`. Session ids are chosen by callers (names) or generated. */
export class SessionsTable {
  private readonly insertStmt;
  private readonly getStmt;
  private readonly endStmt;
  private readonly listStmt;
  private readonly rowsStmt;
  private readonly summaryStmt;
  private readonly metadataStmt;
  private readonly tokenizerStmt;
  /** Ids this process has already ensured, so the hot path skips the INSERT OR IGNORE. */
  private readonly known = new Set<string>();
  /** Ids whose tokenizer this process has already recorded (see recordTokenizer). */
  private readonly tokenizerKnown = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly ownerId: number | null = null,
  ) {
    this.insertStmt = db.readonly
      ? null
      : db.prepare(
          `INSERT OR IGNORE INTO sessions (id, created_at, harness, harness_version, cwd, upstream_url, served_model, metadata, owner_id)
           VALUES (@id, @createdAt, @harness, @harnessVersion, @cwd, @upstreamUrl, @servedModel, @metadata, @ownerId)`,
        );
    this.getStmt = db.prepare('SELECT * FROM sessions WHERE id = ?');
    this.endStmt = db.prepare(`UPDATE sessions SET status = @status, ended_at = @endedAt WHERE id = @id AND status = 'active'`);
    this.listStmt = db.prepare(`${SUMMARY_SQL} GROUP BY s.id ORDER BY s.created_at, s.id`);
    this.rowsStmt = db.prepare(`SELECT * FROM sessions ORDER BY created_at, id`);
    this.summaryStmt = db.prepare(`${SUMMARY_SQL} WHERE s.id = ? GROUP BY s.id`);
    this.metadataStmt = db.prepare(`UPDATE sessions SET metadata = json_patch(metadata, ?) WHERE id = ?`);
    this.tokenizerStmt = db.prepare(
      `UPDATE sessions SET metadata = json_set(metadata, '$.tokenizer', ?) WHERE id = ? AND json_type(metadata, '$.tokenizer') IS NULL`,
    );
  }

  /** Creates the session if it does not exist; returns true when this call created it. */
  ensure(id: string, fields: SessionFields = {}): boolean {
    if (this.known.has(id)) return false;
    if (!this.insertStmt) throw new Error('this store was opened read-only');
    const info = this.insertStmt.run({
      ownerId: this.ownerId,
      id,
      createdAt: Date.now(),
      harness: fields.harness ?? null,
      harnessVersion: fields.harnessVersion ?? null,
      cwd: fields.cwd ?? null,
      upstreamUrl: fields.upstreamUrl ?? null,
      servedModel: fields.servedModel ?? null,
      metadata: JSON.stringify(fields.metadata ?? {}),
    });
    this.known.add(id);
    return info.changes > 0;
  }

  get(id: string): SessionRow | undefined {
    const raw = this.getStmt.get(id) as RawSession | undefined;
    return raw ? toSession(raw) : undefined;
  }

  /** Marks an active session finished; a session already ended keeps its first status. */
  end(id: string, status: Exclude<SessionStatus, 'active'>, endedAt = Date.now()): boolean {
    try {
      return this.endStmt.run({ id, status, endedAt }).changes > 0;
    } catch (err) {
      // Most often at shutdown on a full disk: said as such (the session stays active under an
      // owner that did not close, and the next opener marks it interrupted).
      throw explainStoreError(this.db.name, err);
    }
  }

  /**
   * Names the tokenizer that rendered a token-in session's prompts (verify-faithfulness reads it),
   * unless the session already names one. The proxy calls it on each call: a session is often
   * made before its first call by whoever started the harness (`polar run`, a rollout stage), and
   * only the proxy knows what its upstream renders with. One UPDATE per session per process.
   */
  recordTokenizer(id: string, tokenizer: string): void {
    if (this.tokenizerKnown.has(id)) return;
    this.tokenizerStmt.run(tokenizer, id);
    this.tokenizerKnown.add(id);
  }

  mergeMetadata(id: string, patch: Record<string, unknown>): void {
    this.metadataStmt.run(JSON.stringify(patch), id);
  }

  list(): SessionSummary[] {
    return (this.listStmt.all() as (RawSession & RawCounts)[]).map(toSummary);
  }

  /**
   * Every session's own row, in list()'s order, without its counts: those are a pass over every
   * call of the store, which readers that read the calls themselves (reconstruct, verify, export)
   * need not make first.
   */
  rows(): SessionRow[] {
    return (this.rowsStmt.all() as RawSession[]).map(toSession);
  }

  summary(id: string): SessionSummary | undefined {
    const raw = this.summaryStmt.get(id) as (RawSession & RawCounts) | undefined;
    return raw ? toSummary(raw) : undefined;
  }
}

interface RawCounts {
  requests: number;
  failed: number;
  prompt_tokens: number;
  sampled_tokens: number;
  last_call_at: number | null;
  bridged_calls: number;
  full_renders: number;
}

function toSession(raw: RawSession): SessionRow {
  return {
    id: raw.id,
    createdAt: raw.created_at,
    endedAt: raw.ended_at,
    harness: raw.harness,
    harnessVersion: raw.harness_version,
    cwd: raw.cwd,
    upstreamUrl: raw.upstream_url,
    servedModel: raw.served_model,
    status: raw.status,
    metadata: JSON.parse(raw.metadata) as Record<string, unknown>,
  };
}

function toSummary(raw: RawSession & RawCounts): SessionSummary {
  return {
    ...toSession(raw),
    requests: raw.requests,
    failed: raw.failed,
    promptTokens: raw.prompt_tokens,
    sampledTokens: raw.sampled_tokens,
    lastCallAt: raw.last_call_at,
    bridgedCalls: raw.bridged_calls,
    fullRenders: raw.full_renders,
  };
}
