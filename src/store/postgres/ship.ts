import type { Statement } from 'better-sqlite3';
import { openDb, closeDb, type Db } from '../db.js';
import { isUnreachable, type Postgres } from './client.js';
import { createSetAside, setAsideRows, type SetAsideRow } from './journal.js';
import { pgUpsert, rowsPerStatement, rowValues, sharedColumns, SHARED_TABLES, type TableSpec } from './tables.js';

export interface ShipperOptions {
  /** How often to look for new rows (ms). */
  intervalMs?: number;
  /** Rows per PostgreSQL transaction. */
  batch?: number;
  /**
   * Called once when PostgreSQL becomes unreachable and once when it is back, once when it refuses
   * the journal's rows as a whole, and for each row it refuses that is set aside.
   */
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
 *
 * A row PostgreSQL refuses for a reason of its own (a constraint, a value out of range, a column
 * the server lacks: isRowRefusal) would block every row behind it forever, so a failed batch is
 * halved until the row that fails alone is found; that one is set aside in the journal's
 * `polar_set_aside` table with the error, its outbox entry goes, and the rows behind it ship. Any
 * other refusal (a role that may not write, a full disk, a standby) is the server's, not a row's:
 * everything waits, and `refusal` says why.
 */
export class Shipper {
  private readonly db: Db;
  private readonly columns = new Map<string, string[]>();
  /** Per table: its row by key, as the shipper sends it. */
  private readonly reads = new Map<string, Statement>();
  private readonly specs = new Map<string, TableSpec>(SHARED_TABLES.map((s) => [s.name, s]));
  private readonly lockKey: string;
  /** One outbox entry, if there is any: what the shipper checks before opening a transaction. */
  private readonly anyEntry: Statement;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private down = false;
  private lastTick = 0;
  private stopped = false;
  /** The entries the last batch sent (the failing row, once a batch is down to one). */
  private attempted: OutboxEntry[] = [];
  /** Why PostgreSQL refuses the journal as a whole right now, or null (see the class comment). */
  refusal: Error | null = null;
  /** Rows set aside by this shipper (for its notices). */
  private refused = 0;

  constructor(
    journalFile: string,
    private readonly pg: Postgres,
    private readonly origin: string,
    private readonly options: ShipperOptions = {},
  ) {
    // Its own connection: reading the outbox never waits on, or holds up, the proxy's statements.
    this.db = openDb(journalFile, { reconcileOnly: true });
    createSetAside(this.db);
    for (const spec of SHARED_TABLES) {
      const columns = sharedColumns(this.db, spec.name);
      this.columns.set(spec.name, columns);
      this.reads.set(spec.name, this.db.prepare(`SELECT ${columns.join(', ')} FROM ${spec.name} WHERE ${spec.key.map((k) => `${k} = ?`).join(' AND ')}`));
    }
    this.lockKey = `polar-ship:${origin}`;
    this.anyEntry = this.db.prepare(`SELECT 1 FROM polar_outbox LIMIT 1`);
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

  /** Ships until the outbox is empty; one pass at a time. Returns rows shipped (set-aside rows not counted). */
  async shipAll(): Promise<number> {
    if (this.running) return this.running;
    this.running = (async () => {
      let total = 0;
      const batch = this.options.batch ?? 500;
      let limit = batch;
      try {
        this.tick();
        for (;;) {
          let n: number;
          try {
            n = await this.shipBatch(limit);
          } catch (err) {
            if (!isRowRefusal(err)) throw err;
            // Halved from the head until the row that fails alone is found: the rows before it ship.
            if (limit > 1) {
              limit = Math.ceil(limit / 2);
              continue;
            }
            const entry = this.attempted[0];
            if (!entry) throw err;
            this.setAside(entry, err as PgError);
            limit = batch;
            continue;
          }
          total += n;
          if (n === 0) break;
        }
        this.refusal = null;
        if (this.down && total > 0) {
          this.down = false;
          this.options.onNotice?.(`PostgreSQL at ${this.pg.label} is reachable again; shipping resumed`);
        }
      } catch (err) {
        if (!isUnreachable(err)) {
          if (!this.refusal)
            this.options.onNotice?.(
              `PostgreSQL at ${this.pg.label} refuses this journal's rows: ${(err as Error).message}; they wait in the journal until that is fixed (a role that may write, disk space)`,
            );
          this.refusal = err as Error;
          throw err;
        }
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

  /** Rows PostgreSQL refused, set aside in the journal: how many, and the first few. */
  setAsideRows(limit?: number): { count: number; rows: SetAsideRow[] } {
    return setAsideRows(this.db, limit);
  }

  /** Moves the row that failed alone from the outbox to `polar_set_aside`, with its error. */
  private setAside(entry: OutboxEntry, err: PgError): void {
    // One entry per row: the latest refusal replaces an earlier one (a second process sharing the
    // journal may have set the same entry aside too).
    this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO polar_set_aside (seq, tbl, key, code, message, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (tbl, key) DO UPDATE SET seq = excluded.seq, code = excluded.code, message = excluded.message, detail = excluded.detail, at = excluded.at`,
        )
        .run(entry.seq, entry.tbl, entry.key, err.code ?? null, err.message, err.detail ?? null, Date.now());
      this.db.prepare(`DELETE FROM polar_outbox WHERE seq = ?`).run(entry.seq);
    })();
    // A schema that refuses every row of a table would say so for each: the first few say it.
    if (++this.refused <= 3)
      this.options.onNotice?.(
        `PostgreSQL at ${this.pg.label} refused a row of ${entry.tbl} (key ${entry.key}): ${err.code ? `${err.code} ` : ''}${err.message}; it is set aside in the journal and the rows behind it ship (see \`polar db set-aside --db <url>\`)`,
      );
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

  /**
   * One transaction: lock, read up to `limit` outbox entries and their rows, upsert, commit, then
   * delete them. An empty outbox opens no transaction: an idle process costs PostgreSQL nothing.
   */
  private async shipBatch(limit: number): Promise<number> {
    if (this.anyEntry.get() === undefined) return 0;
    let shipped: OutboxEntry[] = [];
    this.attempted = [];
    const locked = await this.pg.transaction(async (tx) => {
      const got = (await tx.query('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [this.lockKey])).rows[0] as { ok: boolean };
      if (!got.ok) return false; // another process ships this journal right now
      const entries = this.db.prepare(`SELECT seq, tbl, key FROM polar_outbox ORDER BY seq LIMIT ?`).all(limit) as OutboxEntry[];
      shipped = entries;
      this.attempted = entries;
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
    // A row once set aside and since written again has now shipped: it is refused no more.
    const cleared = this.db.prepare(`DELETE FROM polar_set_aside WHERE tbl = ? AND key = ?`);
    this.db.transaction(() => {
      for (const e of shipped) {
        del.run(e.seq);
        cleared.run(e.tbl, e.key);
      }
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

/** What `pg` attaches to a server's error. */
interface PgError extends Error {
  code?: string;
  detail?: string;
}

/**
 * A refusal that belongs to the rows sent, not to the server: data exceptions (class 22: a value
 * out of range, bad encoding), integrity constraints (23: NOT NULL, CHECK, unique), statements the
 * schema cannot run (42: a missing column or table, a type mismatch; but not 42501, a role that
 * may not write, which refuses every row alike) and program limits (54: a row too large to index).
 * Everything else (serialization failures, a full disk, a read-only standby, a cancelled statement)
 * passes, and the rows wait for it.
 */
export function isRowRefusal(err: unknown): boolean {
  if (isUnreachable(err)) return false;
  const code = (err as PgError | null)?.code;
  if (typeof code !== 'string' || code.length !== 5 || code === '42501') return false;
  return ['22', '23', '42', '54'].includes(code.slice(0, 2));
}
