import { openDb, closeDb } from '../db.js';
import { reconcileFile } from '../store.js';
import type { Postgres } from './client.js';
import { migratePostgres } from './schema.js';
import { upsertRows } from './ship.js';
import { sharedColumns, SHARED_TABLES } from './tables.js';

export interface CopyProgress {
  table: string;
  copied: number;
  total: number;
}

/**
 * Copies a local polar database into a shared store, table by table in key order, pages of rows
 * at a time, each page one transaction of upserts by key: running it again (after an interruption,
 * or after more was recorded locally) copies the same rows to the same places and adds only what
 * is new. The file is first brought to the current schema and reconciled, as any reader does.
 * Returns the rows copied per table.
 */
export async function copyToPostgres(file: string, pg: Postgres, onProgress?: (p: CopyProgress) => void): Promise<Record<string, number>> {
  reconcileFile(file);
  await migratePostgres(pg);
  const db = openDb(file, { readonly: true });
  const origin = `copy:${file}`;
  const out: Record<string, number> = {};
  try {
    for (const spec of SHARED_TABLES) {
      const columns = sharedColumns(db, spec.name);
      const total = db.prepare(`SELECT COUNT(*) FROM ${spec.name}`).pluck().get() as number;
      const order = spec.key.join(', ');
      const page = db.prepare(`SELECT ${columns.join(', ')} FROM ${spec.name} ORDER BY ${order} LIMIT ? OFFSET ?`);
      let copied = 0;
      onProgress?.({ table: spec.name, copied, total });
      for (;;) {
        const rows = page.all(200, copied) as Record<string, unknown>[];
        if (rows.length === 0) break;
        await pg.transaction((tx) => upsertRows(tx, spec, columns, rows, origin));
        copied += rows.length;
        onProgress?.({ table: spec.name, copied, total });
      }
      out[spec.name] = copied;
    }
  } finally {
    closeDb(db);
  }
  return out;
}
