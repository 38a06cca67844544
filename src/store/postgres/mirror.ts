import fs from 'node:fs';
import path from 'node:path';
import { closeDb, openDb } from '../db.js';
import type { Db } from '../db.js';
import type { PgQueryable, Postgres } from './client.js';
import { sharedColumns, SHARED_TABLES, type TableSpec } from './tables.js';

/**
 * Brings a reader's local mirror of the shared store up to date: every row written since its last
 * pull, from one consistent snapshot of all tables. A row carries the id of the transaction that
 * last wrote it (`_xid`); a pull takes the rows whose transaction is at or after the oldest one
 * still running at the previous pull (that snapshot's xmin), so a transaction that committed late
 * is never skipped, and the few rows read twice are upserted the same. Then every polar reader
 * (sessions, show, reconstruct, verify, export, replay, report) reads the mirror exactly as it
 * reads a local database. Returns the rows pulled.
 */
export async function syncMirror(pg: Postgres, file: string): Promise<number> {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  let db = openDb(file);
  try {
    db.exec(`CREATE TABLE IF NOT EXISTS polar_mirror (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    let pulled = 0;
    await pg.transaction(async (tx) => {
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const { xmin } = (await tx.query(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`)).rows[0] as { xmin: string };
      const storeId = ((await tx.query(`SELECT value FROM polar_meta WHERE key = 'store_id'`)).rows[0] as { value: string } | undefined)?.value ?? '';
      const mirrored = db.prepare(`SELECT value FROM polar_mirror WHERE key = 'store_id'`).pluck().get() as string | undefined;
      const pulledTo = db.prepare(`SELECT value FROM polar_mirror WHERE key = 'xmin'`).pluck().get() as string | undefined;
      if ((mirrored !== undefined && mirrored !== storeId) || (pulledTo !== undefined && BigInt(xmin) < BigInt(pulledTo))) {
        // Another database at this URL (dropped and made again, another server, a restored dump
        // whose transaction ids went back): what the mirror holds may not be in it, and its
        // transaction ids say nothing here. Start the copy again.
        closeDb(db);
        for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
        db = openDb(file);
        db.exec(`CREATE TABLE IF NOT EXISTS polar_mirror (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
      }
      const since = (db.prepare(`SELECT value FROM polar_mirror WHERE key = 'xmin'`).pluck().get() as string | undefined) ?? '0';
      // Rows may arrive before what they reference (each journal ships on its own): no key checks here.
      db.pragma('foreign_keys = OFF');
      for (const spec of SHARED_TABLES) pulled += await copyRows(tx, db, spec, '_xid >= $1::xid8', [since]);
      const keep = db.prepare(`INSERT INTO polar_mirror (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`);
      keep.run('xmin', xmin);
      keep.run('store_id', storeId);
    });
    return pulled;
  } finally {
    if (db.open) {
      db.pragma('foreign_keys = ON');
      closeDb(db);
    }
  }
}

/**
 * Copies the rows of `spec` that `where` selects (its parameters from $1) into the same table of a
 * polar SQLite database, upserted by key: a row read twice is written the same. Pages in key
 * order, so a large table never sits in memory whole. Rows may arrive before what they reference
 * (each journal ships on its own): the caller turns SQLite's key checks off. Returns the rows copied.
 */
export async function copyRows(tx: PgQueryable, db: Db, spec: TableSpec, where: string, params: readonly unknown[]): Promise<number> {
  const into = upsertInto(db, spec);
  const keyList = spec.key.join(', ');
  let copied = 0;
  let after: unknown[] | null = null;
  for (;;) {
    const values: unknown[] = [...params];
    let cond = '';
    if (after) {
      cond = ` AND (${keyList}) > (${spec.key.map((_, i) => `$${params.length + i + 1}`).join(', ')})`;
      values.push(...after);
    }
    const { rows } = await tx.query(`SELECT ${into.columns.join(', ')} FROM ${spec.name} WHERE (${where})${cond} ORDER BY ${keyList} LIMIT ${PAGE}`, values);
    if (rows.length === 0) break;
    into.write(rows);
    copied += rows.length;
    const last = rows[rows.length - 1]!;
    after = spec.key.map((k) => last[k]);
    if (rows.length < PAGE) break;
  }
  return copied;
}

/** The shared columns of `spec` and a writer that upserts PostgreSQL rows of them by key, in one SQLite transaction. */
export function upsertInto(db: Db, spec: TableSpec): { columns: string[]; write(rows: readonly Record<string, unknown>[]): void } {
  const columns = sharedColumns(db, spec.name);
  const upsert = db.prepare(
    `INSERT INTO ${spec.name} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})
     ON CONFLICT (${spec.key.join(', ')}) DO UPDATE SET ${columns
       .filter((c) => !spec.key.includes(c))
       .map((c) => `${c} = excluded.${c}`)
       .join(', ')}`,
  );
  const write = db.transaction((rows: readonly Record<string, unknown>[]) => {
    for (const row of rows) upsert.run(...columns.map((c) => toSqlite(row[c])));
  });
  return { columns, write: (rows) => write(rows) };
}

const PAGE = 500;

function toSqlite(v: unknown): unknown {
  if (v === undefined) return null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  return v;
}
