import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Db } from '../db.js';
import { redactUrl, stateDir } from './url.js';
import { keyExpression, SHARED_TABLES } from './tables.js';

/** A short name for a database URL (its password left out, so changing it keeps the files). */
function urlKey(url: string): string {
  return createHash('sha256').update(redactUrl(url)).digest('hex').slice(0, 16);
}

/**
 * The journal: an ordinary polar SQLite database on this machine that every writing polar process
 * pointed at the same PostgreSQL URL shares. Calls commit here, before their last byte reaches the
 * harness, exactly as with `--db FILE`; the shipper (ship.ts) copies them on to PostgreSQL.
 */
export function journalPath(url: string, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(stateDir(env), `journal-${urlKey(url)}.db`);
}

/** A reader's local copy of the shared store, brought up to date before each read (mirror.ts). */
export function mirrorPath(url: string, env: NodeJS.ProcessEnv = process.env): string {
  return path.join(stateDir(env), `mirror-${urlKey(url)}.db`);
}

/**
 * Makes a polar SQLite database a journal: an outbox that triggers fill with the key of every row
 * written to a shared table, in commit order, and the journal's own id (the `origin` of the rows it
 * ships). The triggers cost one small insert per row write, in the writer's own transaction, so a
 * committed row is always in the outbox: nothing can be written without being shipped.
 */
export function prepareJournal(db: Db): string {
  db.exec(`
    CREATE TABLE IF NOT EXISTS polar_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT NOT NULL, key TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS polar_journal (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  `);
  createSetAside(db);
  for (const spec of SHARED_TABLES) {
    for (const event of ['INSERT', 'UPDATE']) {
      db.exec(`CREATE TRIGGER IF NOT EXISTS polar_ship_${spec.name}_${event.toLowerCase()} AFTER ${event} ON ${spec.name}
               BEGIN INSERT INTO polar_outbox (tbl, key) VALUES ('${spec.name}', ${keyExpression(spec, 'NEW')}); END;`);
    }
  }
  const id = `${os.hostname()}/${randomBytes(6).toString('hex')}`;
  db.prepare(`INSERT OR IGNORE INTO polar_journal (key, value) VALUES ('origin', ?)`).run(id);
  return db.prepare(`SELECT value FROM polar_journal WHERE key = 'origin'`).pluck().get() as string;
}

/** One row PostgreSQL refused (ship.ts), kept on this machine with the refusal. */
export interface SetAsideRow {
  /** The outbox entry it was last shipped from (its order among this journal's writes). */
  seq: number;
  /** The shared table and the row's key there (JSON for a composite key, as in the outbox). */
  tbl: string;
  key: string;
  /** PostgreSQL's SQLSTATE, message and detail (null where it gave none). */
  code: string | null;
  message: string;
  detail: string | null;
  /** When it was set aside (ms since the epoch). */
  at: number;
}

/**
 * Rows PostgreSQL refused for a reason of their own (a constraint, a value out of range, a column
 * it lacks), set aside so they stop blocking the rows behind them. The row itself stays in its
 * table here; this holds its key, and the error, until it is shipped again (`polar db set-aside
 * --retry`) or the journal is removed.
 */
export function createSetAside(db: Db): void {
  // One entry per row: a row refused again (it was written again, or retried) keeps one entry, with the latest error.
  db.exec(`CREATE TABLE IF NOT EXISTS polar_set_aside (
    tbl TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL,
    code TEXT, message TEXT NOT NULL, detail TEXT, at INTEGER NOT NULL, PRIMARY KEY (tbl, key))`);
}

/** How many rows are set aside in a journal, and the first `limit` of them (oldest first). */
export function setAsideRows(db: Db, limit = 5): { count: number; rows: SetAsideRow[] } {
  const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'polar_set_aside'`).get();
  if (!exists) return { count: 0, rows: [] };
  const count = db.prepare(`SELECT COUNT(*) FROM polar_set_aside`).pluck().get() as number;
  const rows = db.prepare(`SELECT seq, tbl, key, code, message, detail, at FROM polar_set_aside ORDER BY seq LIMIT ?`).all(limit) as SetAsideRow[];
  return { count, rows };
}

/**
 * Puts every set-aside row back in the outbox, behind what is already there, so the next shipping
 * pass sends it again (as the row is now); returns how many. A row refused again is set aside again.
 */
export function requeueSetAside(db: Db): number {
  createSetAside(db);
  return db.transaction(() => {
    const n = db.prepare(`INSERT INTO polar_outbox (tbl, key) SELECT tbl, key FROM polar_set_aside ORDER BY seq`).run().changes;
    db.prepare(`DELETE FROM polar_set_aside`).run();
    return n;
  })();
}
