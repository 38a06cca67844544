import pg from 'pg';
import { PolarError } from '../../core/errors.js';
import { connectionUrl } from './password.js';
import { redactUrl } from './url.js';

/** What a query needs: the pool itself, or one transaction's client. */
export interface PgQueryable {
  query(text: string, values?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

/**
 * BIGINT columns hold milliseconds and counts, all far below 2^53: read them as numbers, as SQLite
 * gives them. Per pool, not through pg's global type registry, so no other user of `pg` in the
 * process is affected.
 */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 && format !== 'binary') return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/** Connections a pool opens when its owner does not say (`POLAR_PG_POOL`, default 4). */
export const DEFAULT_POOL = 4;

/**
 * This process's pool size: `POLAR_PG_POOL` when it is a whole number from 1 to 1000, else `fallback`.
 * A bad value is refused by name, so a typo never silently becomes a default.
 */
export function poolSize(fallback = DEFAULT_POOL): number {
  const raw = process.env.POLAR_PG_POOL;
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new PolarError('POLAR_USAGE', `POLAR_PG_POOL must be a whole number of connections from 1 to 1000 (got ${JSON.stringify(raw)})`);
  return n;
}

/**
 * A connection pool to one PostgreSQL database. Idle connections that the server drops (a restart)
 * are replaced on the next query instead of crashing the process, and every failure to reach the
 * server comes out as POLAR_STORE_UNREACHABLE, so callers can tell "try again later" from a bug.
 * At most `max` connections (default: poolSize()); idle ones close after 30 s, so an idle process
 * holds none. Only plain statements and transaction-scoped locks go through it, so it works behind
 * PgBouncer in transaction mode; a connection that LISTENs is `dedicated` and must reach PostgreSQL itself.
 */
export class Postgres {
  readonly pool: pg.Pool;
  /** The URL without its password, for messages. */
  readonly label: string;

  private readonly url: string;

  constructor(url: string, options: { max?: number; applicationName?: string } = {}) {
    this.label = redactUrl(url);
    this.url = url;
    this.pool = new pg.Pool({
      // The password: in the URL, PGPASSWORD, or the password file (password.ts); never from argv of a child.
      connectionString: connectionUrl(url),
      max: options.max ?? poolSize(),
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 30_000,
      application_name: options.applicationName ?? 'polar',
      types,
    });
    this.pool.on('error', () => {
      // An idle client lost its connection (server restarted): the pool drops it and reconnects.
    });
  }

  async query(text: string, values?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }> {
    try {
      return await this.pool.query(text, values as unknown[]);
    } catch (err) {
      throw asStoreError(err, this.label);
    }
  }

  /** Runs `fn` in one transaction; rolls back if it throws. */
  async transaction<T>(fn: (tx: PgQueryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw asStoreError(err, this.label);
    }
    let broken = false;
    // A connection the server drops while it is checked out emits 'error' on the client itself, which
    // the pool no longer listens to: without a listener that would end the process. The failing query
    // rejects anyway, and the client is released as broken.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const out = await fn({ query: (text, values) => client.query(text, values as unknown[]) });
      await client.query('COMMIT');
      return out;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw asStoreError(err, this.label);
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  /** A connection of its own, outside the pool (one that LISTENs must stay), named `applicationName`; the caller connects and ends it. */
  dedicated(applicationName: string): pg.Client {
    // Keepalive: a connection that died without a word (a machine cut off) is noticed, not listened on forever.
    return new pg.Client({
      connectionString: connectionUrl(this.url),
      application_name: applicationName,
      connectionTimeoutMillis: 5000,
      keepAlive: true,
      types,
    });
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * How long a reader or writer waits out PostgreSQL being unreachable before it gives up (ms):
 * `POLAR_PG_RETRY_S`, default 300 s, longer than a restart or a managed failover (30–120 s) takes.
 */
export function pgRetryMs(): number {
  const v = Number(process.env.POLAR_PG_RETRY_S);
  return Number.isFinite(v) && v >= 0 && process.env.POLAR_PG_RETRY_S !== '' ? v * 1000 : 300_000;
}

/** Where a wait is said: stderr unless the caller has its own notice line. */
export type RetryLog = (line: string) => void;
const stderrLog: RetryLog = (line) => process.stderr.write(`polar: ${line}\n`);

/**
 * One outage per process, said once: however many readers and writers wait through it at once,
 * the first says it started and the first to get through says it is over.
 */
let outage: { since: number; said: Set<RetryLog> } | null = null;

/**
 * `fn`, tried again while it fails because PostgreSQL cannot be reached (a restart, a failover, or
 * a machine so busy that a connection takes longer than the pool waits), with backoff up to 4 s,
 * for up to `forMs` (POLAR_PG_RETRY_S); a line goes to `log` when the wait starts and when the
 * server is back. Any other error is thrown as it is; the last unreachable one, when time is up,
 * as POLAR_STORE_UNREACHABLE saying what to do.
 */
export async function whileUnreachable<T>(fn: () => Promise<T>, forMs = pgRetryMs(), log: RetryLog = stderrLog): Promise<T> {
  const until = Date.now() + forMs;
  let waited = false;
  for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
    try {
      const out = await fn();
      if (waited && outage) {
        log(`PostgreSQL is reachable again after ${Math.round((Date.now() - outage.since) / 1000)} s`);
        outage = null;
      }
      return out;
    } catch (err) {
      if (!isUnreachable(err)) throw err;
      if (Date.now() + wait > until) throw givenUp(err, forMs);
      if (!outage) outage = { since: Date.now(), said: new Set() };
      if (!outage.said.has(log)) {
        outage.said.add(log);
        log(`${(err as Error).message}; waiting for it${Number.isFinite(forMs) ? ` up to ${Math.round(forMs / 1000)} s (POLAR_PG_RETRY_S)` : ''}`);
      }
      waited = true;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

function givenUp(err: unknown, forMs: number): PolarError {
  const message = (err as Error).message;
  const waited = forMs > 0 ? ` (waited ${Math.round(forMs / 1000)} s)` : '';
  return new PolarError(
    'POLAR_STORE_UNREACHABLE',
    `${message.startsWith('PostgreSQL') ? message : `PostgreSQL is unreachable: ${message}`}${waited}; start it or check the URL and network, or wait longer with POLAR_PG_RETRY_S=SECONDS`,
    503,
    { cause: err },
  );
}

/**
 * Errors that mean "the server is not there right now", as opposed to a refused statement: every
 * way a restart or failover shows itself to a client. Before: connections refused or reset. During
 * shutdown: 57P01 (admin_shutdown, "terminating connection due to administrator command") on open
 * connections, "the database system is shutting down" (57P03) to new ones, and pg's "Connection
 * terminated unexpectedly" for a socket that closed. While it starts: "the database system is
 * starting up" (57P03) or "in recovery mode" (57P03 on a promoted standby), "not yet accepting connections".
 */
export function isUnreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string; errors?: unknown[] };
  if (e instanceof PolarError) return e.code === 'POLAR_STORE_UNREACHABLE';
  // Node's connect tries IPv6 and IPv4 addresses of `localhost` and reports both failures at once.
  if (Array.isArray(e?.errors) && e.errors.length > 0 && e.errors.every(isUnreachable)) return true;
  return (
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      'EAI_AGAIN',
      'EHOSTUNREACH',
      'ENETUNREACH',
      '57P01',
      '57P02',
      '57P03',
      '08000',
      '08003',
      '08006',
      '08001',
      '08004',
    ].includes(e?.code ?? '') || UNREACHABLE_MESSAGE.test(e?.message ?? '')
  );
}

/**
 * What PostgreSQL, pg and PgBouncer say while the server is away. PgBouncer in front of a
 * restarting server answers its clients itself: "server login has been failing, try again later
 * (server_login_retry)" or "pgbouncer cannot connect to server" (08P01), until its next login works.
 */
const UNREACHABLE_MESSAGE = new RegExp(
  [
    'Connection terminated',
    'timeout exceeded when trying to connect',
    'the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)',
    'terminating connection due to administrator command',
    'Client has encountered a connection error',
    'server login has been failing',
    'pgbouncer cannot connect to server',
    'server_login_retry',
  ].join('|'),
  'i',
);

function asStoreError(err: unknown, label: string): unknown {
  if (err instanceof PolarError) return err;
  if (isUnreachable(err))
    return new PolarError('POLAR_STORE_UNREACHABLE', `PostgreSQL at ${label} is unreachable: ${(err as Error).message}`, 503, { cause: err });
  return err;
}
