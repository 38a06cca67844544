import { newId } from '../core/ids.js';
import type { Db } from './db.js';

/**
 * Calls a proxy refused for want of the session's capability (proxy/session-keys.ts). They are kept
 * apart from `requests` on purpose: a refused call belongs to no session, so no export, reward or
 * trace can ever include it, and an operator still sees who tried what.
 */
export interface AuditEntry {
  /** When the call arrived (ms since the epoch). */
  at: number;
  method: string;
  /** The request path, secret-named query parameters redacted. */
  path: string;
  /** The session the call named (path, header or key), as given; null when it named none. */
  claimedSession: string | null;
  /** A stable code: see RefusalReason. */
  reason: string;
  /** `unix` for a Unix-socket caller, else its address. */
  remote: string | null;
  /** Redacted (redact.ts): credential values never reach this table. */
  requestHeaders: Record<string, string>;
}

export interface AuditRow extends AuditEntry {
  id: string;
}

interface RawAudit {
  id: string;
  at: number;
  method: string;
  path: string;
  claimed_session: string | null;
  reason: string;
  remote: string | null;
  request_headers: string | null;
}

export interface AuditQuery {
  /** Only rows at or after this time. */
  since?: number;
  /** Only rows that claimed this session. */
  session?: string;
  /** The newest this many (default 1000). */
  limit?: number;
}

/** The audit table. Statements are prepared on first use: a read-only store opened on an older file may lack the table. */
export class AuditTable {
  constructor(private readonly db: Db) {}

  record(entry: AuditEntry): string {
    const id = newId('aud');
    this.db
      .prepare(`INSERT INTO audit (id, at, method, path, claimed_session, reason, remote, request_headers) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(id, entry.at, entry.method, entry.path, entry.claimedSession, entry.reason, entry.remote, JSON.stringify(entry.requestHeaders));
    return id;
  }

  /** Newest first. */
  list(query: AuditQuery = {}): AuditRow[] {
    if (!this.exists()) return [];
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.since !== undefined) {
      where.push('at >= ?');
      params.push(query.since);
    }
    if (query.session !== undefined) {
      where.push('claimed_session = ?');
      params.push(query.session);
    }
    const sql = `SELECT * FROM audit${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY at DESC, id DESC LIMIT ?`;
    const rows = this.db.prepare(sql).all(...params, query.limit ?? 1000) as RawAudit[];
    return rows.map(toRow);
  }

  /** How many refusals there were since `since`. */
  count(since = 0): number {
    if (!this.exists()) return 0;
    return this.db.prepare(`SELECT COUNT(*) FROM audit WHERE at >= ?`).pluck().get(since) as number;
  }

  private exists(): boolean {
    return this.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit'`).pluck().get() === 1;
  }
}

function toRow(r: RawAudit): AuditRow {
  return {
    id: r.id,
    at: r.at,
    method: r.method,
    path: r.path,
    claimedSession: r.claimed_session,
    reason: r.reason,
    remote: r.remote,
    requestHeaders: r.request_headers ? (JSON.parse(r.request_headers) as Record<string, string>) : {},
  };
}
