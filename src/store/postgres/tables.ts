import type { Db } from '../db.js';

/**
 * The tables a shared store holds, in the order rows must arrive (a session before its calls, a
 * call before its bodies, a rollout before its samples), with their keys. Columns are read from
 * the SQLite schema itself, less `owner_id` (owners are per machine; see schema.ts), so a column
 * added by a SQLite migration is copied as soon as the PostgreSQL migration adds it too (a test
 * checks the two schemas agree).
 */
export interface TableSpec {
  name: string;
  key: readonly string[];
}

export const SHARED_TABLES: readonly TableSpec[] = [
  { name: 'sessions', key: ['id'] },
  { name: 'requests', key: ['id'] },
  { name: 'request_bodies', key: ['request_id'] },
  { name: 'rollouts', key: ['id'] },
  { name: 'rollout_tasks', key: ['rollout_id', 'task_id'] },
  { name: 'samples', key: ['id'] },
  { name: 'groups', key: ['rollout_id', 'task_id'] },
  { name: 'audit', key: ['id'] },
];

/** Columns that stay on the machine that wrote them. */
const LOCAL_COLUMNS = new Set(['owner_id']);

/** The columns of `table` that the shared store holds, in the SQLite schema's order. */
export function sharedColumns(db: Db, table: string): string[] {
  return (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name).filter((c) => !LOCAL_COLUMNS.has(c));
}

/** The SQL expression a SQLite trigger uses to write the same key text from NEW. */
export function keyExpression(spec: TableSpec, alias: string): string {
  return spec.key.length === 1 ? `${alias}.${spec.key[0]}` : `json_array(${spec.key.map((k) => `${alias}.${k}`).join(', ')})`;
}

/** Values of `row` for `columns`, as PostgreSQL parameters (SQLite gives Buffers, numbers, strings, null). */
export function rowValues(row: Record<string, unknown>, columns: readonly string[]): unknown[] {
  return columns.map((c) => row[c] ?? null);
}

/**
 * One multi-row upsert into PostgreSQL: every column but the key is replaced by the incoming row,
 * so sending a row twice changes nothing (shipping and `db copy` are idempotent by key).
 */
export function pgUpsert(spec: TableSpec, columns: readonly string[], rows: number, extra: readonly string[] = []): string {
  const all = [...columns, ...extra];
  const values: string[] = [];
  let p = 1;
  for (let r = 0; r < rows; r++) values.push(`(${all.map(() => `$${p++}`).join(', ')})`);
  const updates = all.filter((c) => !spec.key.includes(c)).map((c) => `${c} = EXCLUDED.${c}`);
  return `INSERT INTO ${spec.name} (${all.join(', ')}) VALUES ${values.join(', ')} ON CONFLICT (${spec.key.join(', ')}) DO UPDATE SET ${updates.join(', ')}`;
}

/** PostgreSQL caps a statement at 65,535 parameters. */
export function rowsPerStatement(columns: number): number {
  return Math.max(1, Math.min(500, Math.floor(60_000 / columns)));
}
