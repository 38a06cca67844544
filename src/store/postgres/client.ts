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

/**
 * A connection pool to one PostgreSQL database. Idle connections that the server drops (a restart)
 * are replaced on the next query instead of crashing the process, and every failure to reach the
 * server comes out as POLAR_STORE_UNREACHABLE, so callers can tell "try again later" from a bug.
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
      max: options.max ?? 4,
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
 * `fn`, tried again while it fails because PostgreSQL cannot be reached (a restart, or a machine so
 * busy that a connection takes longer than the pool waits), with backoff up to 4 s, for up to
 * `forMs`; any other error, or the last one, is thrown.
 */
export async function whileUnreachable<T>(fn: () => Promise<T>, forMs = 120_000): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isUnreachable(err) || Date.now() + wait > until) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** Errors that mean "the server is not there right now", as opposed to a refused statement. */
export function isUnreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (e instanceof PolarError) return e.code === 'POLAR_STORE_UNREACHABLE';
  return (
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      'EHOSTUNREACH',
      '57P01',
      '57P02',
      '57P03',
      '08000',
      '08003',
      '08006',
      '08001',
      '08004',
    ].includes(e?.code ?? '') ||
    /Connection terminated|timeout exceeded when trying to connect|the database system is (starting|shutting) up/i.test(e?.message ?? '')
  );
}

function asStoreError(err: unknown, label: string): unknown {
  if (err instanceof PolarError) return err;
  if (isUnreachable(err))
    return new PolarError('POLAR_STORE_UNREACHABLE', `PostgreSQL at ${label} is unreachable: ${(err as Error).message}`, 503, { cause: err });
  return err;
}
