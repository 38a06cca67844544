import pg from 'pg';

/**
 * What the fleet check watches in PostgreSQL while the rollout runs: every attempt of every sample
 * (which host ran it, in which session: a sample row only keeps its last), and per host the
 * connections it holds (pg_stat_activity by client address). PostgreSQL's restart makes a poll
 * fail; the poll after it tries again.
 */
export interface Attempt {
  sample: string;
  attempt: number;
  worker: string;
  session: string | null;
  /** The statuses this attempt was seen in, in order. */
  statuses: string[];
}

export class Observer {
  readonly attempts = new Map<string, Attempt>();
  /** Most connections seen at once, by client address. */
  readonly maxConnections = new Map<string, number>();
  /** Most connections seen at once from all hosts together. */
  peakTotal = 0;
  private readonly pool: pg.Pool;
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(
    url: string,
    private readonly addresses: readonly string[],
  ) {
    this.pool = new pg.Pool({ connectionString: url, max: 1, application_name: 'fleet-check' });
    // A restart ends the idle connection under the pool: said here instead of crashing the check.
    this.pool.on('error', () => undefined);
  }

  start(everyMs = 250): void {
    this.timer = setInterval(() => void this.poll(), everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  async query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.pool.query<R>(text, values)).rows;
  }

  /** Running samples (not ended, an attempt started) on a host, by its hostname. */
  async runningOn(hostname: string): Promise<{ id: string; session_id: string; attempt: number }[]> {
    return this.query<{ id: string; session_id: string; attempt: number }>(
      `SELECT id, session_id, attempt::int AS attempt FROM samples WHERE status = 'running' AND split_part(worker, '/', 1) = $1`,
      [hostname],
    ).catch(() => []);
  }

  private async poll(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const samples = await this.query<{ id: string; attempt: string; worker: string | null; session_id: string | null; status: string }>(
        `SELECT id, attempt, worker, session_id, status FROM samples WHERE attempt > 0`,
      );
      for (const s of samples) {
        const key = `${s.id}#${s.attempt}`;
        const a = this.attempts.get(key) ?? { sample: s.id, attempt: Number(s.attempt), worker: s.worker ?? '?', session: s.session_id, statuses: [] };
        if (a.statuses.at(-1) !== s.status) a.statuses.push(s.status);
        this.attempts.set(key, a);
      }
      const conns = await this.query<{ a: string; n: number }>(
        `SELECT host(client_addr) AS a, count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND client_addr IS NOT NULL GROUP BY 1`,
      );
      let total = 0;
      for (const c of conns) {
        if (!this.addresses.includes(c.a)) continue;
        total += c.n;
        this.maxConnections.set(c.a, Math.max(this.maxConnections.get(c.a) ?? 0, c.n));
      }
      this.peakTotal = Math.max(this.peakTotal, total);
    } catch {
      // PostgreSQL is restarting: the next poll tries again.
    } finally {
      this.busy = false;
    }
  }

  /**
   * Each host's statements per second while idle: pg_stat_activity sampled every 100 ms for
   * `ms`, each backend's distinct state_change times counted (a statement moves its backend to
   * active and back). Sampling misses statements closer than 100 ms apart, so it is a floor; the
   * database's own transaction counter over the same window (pg_stat_database) is the total.
   */
  async idleRates(ms: number): Promise<{ perHost: Map<string, number>; totalXactPerS: number }> {
    const seen = new Map<string, Set<string>>();
    const backends = new Map<string, Set<number>>();
    const xacts = async () => {
      await this.query('SELECT pg_stat_clear_snapshot()');
      const [row] = await this.query<{ n: string }>(`SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database()`);
      return Number(row?.n ?? 0);
    };
    // Stats reach pg_stat_database when a backend flushes them (within a second or so when idle): a settle first.
    await new Promise((r) => setTimeout(r, 2000));
    const before = await xacts();
    const started = Date.now();
    while (Date.now() - started < ms) {
      const rows = await this.query<{ a: string; pid: number; c: string }>(
        `SELECT host(client_addr) AS a, pid, state_change::text AS c FROM pg_stat_activity WHERE datname = current_database() AND client_addr IS NOT NULL`,
      ).catch(() => []);
      for (const r of rows) {
        if (!this.addresses.includes(r.a)) continue;
        const set = seen.get(r.a) ?? new Set<string>();
        set.add(`${r.pid}@${r.c}`);
        seen.set(r.a, set);
        backends.set(r.a, (backends.get(r.a) ?? new Set<number>()).add(r.pid));
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (Date.now() - started) / 1000;
    await new Promise((r) => setTimeout(r, 2000));
    // Own statements in the window: one per sample above plus the counter reads, not the hosts'.
    const own = Math.round(seconds * 10) + 4;
    const total = Math.max(0, (await xacts()) - before - own);
    const perHost = new Map<string, number>();
    // Each backend's first state_change seen is from before the window, not a statement in it.
    for (const a of this.addresses) perHost.set(a, Math.max(0, (seen.get(a)?.size ?? 0) - (backends.get(a)?.size ?? 0)) / seconds);
    return { perHost, totalXactPerS: total / seconds };
  }

  async close(): Promise<void> {
    this.stop();
    await this.pool.end().catch(() => undefined);
  }
}
