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
