import type { Statement } from 'better-sqlite3';
import { openDb, closeDb, type Db } from '../db.js';
import { isUnreachable, type Postgres } from './client.js';
import { pgUpsert, rowsPerStatement, rowValues, sharedColumns, SHARED_TABLES, type TableSpec } from './tables.js';

export interface ShipperOptions {
  /** How often to look for new rows (ms). */
  intervalMs?: number;
  /** Rows per PostgreSQL transaction. */
  batch?: number;
  /** Called once when PostgreSQL becomes unreachable and once when it is back. */
  onNotice?: (line: string) => void;
  /** Also run periodically (every ~5 s): the journal's crash reconciliation. */
  onTick?: () => void;
}

interface OutboxEntry {
  seq: number;
  tbl: string;
  key: string;
}

/**
 * Ships a journal's committed rows to PostgreSQL, in commit order, idempotently by key: a row sent
 * twice (a retry after a lost reply, two processes sharing the journal) ends up the same. One
 * shipper per journal at a time, by a transaction-scoped advisory lock on the journal's origin: the
 * rows are read from the journal only after the lock is held, so PostgreSQL never receives an
 * older version of a row after a newer one. Outbox entries are deleted only after PostgreSQL
 * committed them; while it is unreachable they wait, and the hot path never does.
 */
export class Shipper {
  private readonly db: Db;
  private readonly columns = new Map<string, string[]>();
  /** Per table: its row by key, as the shipper sends it. */
  private readonly reads = new Map<string, Statement>();
  private readonly specs = new Map<string, TableSpec>(SHARED_TABLES.map((s) => [s.name, s]));
  private readonly lockKey: string;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private down = false;
  private lastTick = 0;
  private stopped = false;

  constructor(
    journalFile: string,
    private readonly pg: Postgres,
    private readonly origin: string,
    private readonly options: ShipperOptions = {},
  ) {
    // Its own connection: reading the outbox never waits on, or holds up, the proxy's statements.
    this.db = openDb(journalFile, { reconcileOnly: true });
    for (const spec of SHARED_TABLES) {
      const columns = sharedColumns(this.db, spec.name);
      this.columns.set(spec.name, columns);
      this.reads.set(spec.name, this.db.prepare(`SELECT ${columns.join(', ')} FROM ${spec.name} WHERE ${spec.key.map((k) => `${k} = ?`).join(' AND ')}`));
    }
    this.lockKey = `polar-ship:${origin}`;
  }

  start(): void {
    const interval = this.options.intervalMs ?? 200;
    const loop = async () => {
      if (this.stopped) return;
      await this.shipAll().catch(() => 0);
      if (!this.stopped) this.timer = setTimeout(loop, this.down ? Math.min(interval * 10, 2000) : interval);
      this.timer?.unref();
    };
    this.timer = setTimeout(loop, 0);
    this.timer.unref();
  }

  /** Rows waiting in the outbox. */
  pending(): number {
    return this.db.prepare(`SELECT COUNT(*) FROM polar_outbox`).pluck().get() as number;
  }

  /** Ships until the outbox is empty; one pass at a time. Returns rows shipped. */
  async shipAll(): Promise<number> {
    if (this.running) return this.running;
    this.running = (async () => {
      let total = 0;
      try {
        this.tick();
        for (;;) {
          const n = await this.shipBatch();
          total += n;
          if (n === 0) break;
        }
        if (this.down) {
          this.down = false;
          this.options.onNotice?.(`PostgreSQL at ${this.pg.label} is reachable again; shipping resumed`);
        }
      } catch (err) {
        if (!isUnreachable(err)) throw err;
        if (!this.down)
          this.options.onNotice?.(`PostgreSQL at ${this.pg.label} is unreachable; calls are kept in the local journal and shipped when it returns`);
        this.down = true;
      } finally {
        this.running = null;
      }
      return total;
    })();
    return this.running;
  }

  /**
   * Ships everything, waiting up to `timeoutMs` for PostgreSQL to come back; returns the rows still
   * waiting (they stay in the journal, and the next polar process on this machine ships them).
   */
  async flush(timeoutMs = 10_000): Promise<number> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      await this.shipAll().catch(() => 0);
      const left = this.pending();
      if (left === 0 || Date.now() >= until) return left;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /**
   * Ships every row committed to the journal before this call (rows written meanwhile may wait for
   * the next pass), waiting up to `timeoutMs` for PostgreSQL or for another process that holds the
   * journal's lock; returns how many of those rows are still waiting.
   */
  async shipCommitted(timeoutMs = 10_000): Promise<number> {
    const mark = this.db.prepare(`SELECT MAX(seq) FROM polar_outbox`).pluck().get() as number | null;
    if (mark === null) return 0;
    const left = this.db.prepare(`SELECT COUNT(*) FROM polar_outbox WHERE seq <= ?`).pluck();
    const until = Date.now() + timeoutMs;
    for (let wait = 20; ; wait = Math.min(wait * 2, 250)) {
      await this.shipAll().catch(() => 0);
      const n = left.get(mark) as number;
      if (n === 0 || Date.now() >= until) return n;
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => 0);
    closeDb(this.db, { checkpoint: false });
  }

  private tick(): void {
    if (!this.options.onTick || Date.now() - this.lastTick < 5000) return;
    this.lastTick = Date.now();
    try {
      this.options.onTick();
    } catch {
      // best effort: the next tick tries again
    }
  }

  /** One transaction: lock, read up to `batch` outbox entries and their rows, upsert, commit, then delete them. */
  private async shipBatch(): Promise<number> {
    const limit = this.options.batch ?? 500;
    let shipped: OutboxEntry[] = [];
    const locked = await this.pg.transaction(async (tx) => {
      const got = (await tx.query('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [this.lockKey])).rows[0] as { ok: boolean };
      if (!got.ok) return false; // another process ships this journal right now
      const entries = this.db.prepare(`SELECT seq, tbl, key FROM polar_outbox ORDER BY seq LIMIT ?`).all(limit) as OutboxEntry[];
      shipped = entries;
      // Latest entry per row wins the order slot; the row is read as it is now.
      const order: { spec: TableSpec; key: string }[] = [];
      const seen = new Set<string>();
      for (const e of entries) {
        const id = `${e.tbl}\u0000${e.key}`;
        if (seen.has(id)) continue;
        seen.add(id);
        const spec = this.specs.get(e.tbl);
        if (spec) order.push({ spec, key: e.key });
      }
      // Group runs of the same table, keeping the order between tables.
      let i = 0;
      while (i < order.length) {
        const spec = order[i]!.spec;
        const run: string[] = [];
        while (i < order.length && order[i]!.spec === spec) run.push(order[i++]!.key);
        await this.upsert(tx, spec, run);
      }
      return true;
    });
    if (!locked || shipped.length === 0) return 0;
    const del = this.db.prepare(`DELETE FROM polar_outbox WHERE seq = ?`);
    this.db.transaction(() => {
      for (const e of shipped) del.run(e.seq);
    })();
    return shipped.length;
  }

  private async upsert(tx: { query(text: string, values?: readonly unknown[]): Promise<unknown> }, spec: TableSpec, keys: readonly string[]): Promise<void> {
    const columns = this.columns.get(spec.name)!;
    const read = this.reads.get(spec.name)!;
    const rows: Record<string, unknown>[] = [];
    for (const key of keys) {
      const args = spec.key.length === 1 ? [key] : (JSON.parse(key) as unknown[]);
      const row = read.get(...args) as Record<string, unknown> | undefined;
      if (row) rows.push(row);
    }
    await upsertRows(tx, spec, columns, rows, this.origin);
  }
}

/** Upserts rows read from a polar SQLite database into PostgreSQL, stamped with their origin. */
export async function upsertRows(
  tx: { query(text: string, values?: readonly unknown[]): Promise<unknown> },
  spec: TableSpec,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
  origin: string,
): Promise<void> {
  const per = rowsPerStatement(columns.length + 1);
  for (let at = 0; at < rows.length; at += per) {
    const chunk = rows.slice(at, at + per);
    const values: unknown[] = [];
    for (const row of chunk) values.push(...rowValues(row, columns), origin);
    await tx.query(pgUpsert(spec, columns, chunk.length, ['origin']), values);
  }
}
