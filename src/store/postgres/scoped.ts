import fs from 'node:fs';
import path from 'node:path';
import { closeDb, openDb, type Db } from '../db.js';
import type { ReadScope } from '../open-options.js';
import type { PgQueryable, Postgres } from './client.js';
import { upsertInto } from './mirror.js';
import { SHARED_TABLES, type TableSpec } from './tables.js';

/**
 * A reader that names what it reads (`export --rollout R`, `rollout status R`, `export --session S`)
 * pulls only those rows into a polar SQLite file of its own, made fresh for this read, and then
 * reads it exactly as it reads a local database. The whole-store mirror (mirror.ts) copies every
 * row written since its last pull of every table; with a fleet's rollouts in one store that is the
 * whole store, to read one rollout.
 *
 * What a scope brings, from one consistent snapshot (REPEATABLE READ), each step by an index:
 * - a rollout: its row, its tasks, its samples and its groups (rollouts.id, rollout_tasks' and
 *   groups' keys, samples_rollout);
 * - the sessions of those samples' final attempts (samples.session_id) and the sessions named;
 *   for a named session, the sample whose attempt it is and that sample's rollout and groups, so
 *   its traces carry their reward and group as they do from the mirror (samples_session);
 * - unless `calls` is false: those sessions' calls (requests_session) and their bodies; then any
 *   call another one is stored against (a prompt or body delta's base) that is not among them.
 *
 * Made fresh for each read, it holds what PostgreSQL holds now: a session's rows that arrived after
 * an earlier read are never missed, and the mirror's own bookkeeping (what it pulled up to) is
 * never touched. Returns the rows copied, by table.
 */
export async function pullScoped(pg: Postgres, file: string, scope: ReadScope): Promise<Record<string, number>> {
  const db = openDb(file);
  const counts: Record<string, number> = Object.fromEntries(SHARED_TABLES.map((t) => [t.name, 0]));
  try {
    // Rows may arrive before what they reference (each journal ships on its own): no key checks here.
    db.pragma('foreign_keys = OFF');
    await pg.transaction(async (tx) => {
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const copy: Copy = async (table, where, params) => {
        counts[table] = (counts[table] ?? 0) + (await copyScoped(tx, db, spec(table), where, params));
      };
      const named = [...new Set(scope.sessions ?? [])];
      // The samples whose attempts the named sessions are: their rollouts come along (row and groups only).
      if (named.length > 0) await copy('samples', 'session_id = ANY($1::text[])', [named]);
      const linked = db.prepare(`SELECT DISTINCT rollout_id FROM samples`).pluck().all() as string[];
      const rollouts = [...new Set(scope.rollouts ?? [])];
      const all = [...new Set([...rollouts, ...linked])];
      if (all.length > 0) {
        await copy('rollouts', 'id = ANY($1::text[])', [all]);
        await copy('groups', 'rollout_id = ANY($1::text[])', [all]);
      }
      if (rollouts.length > 0) {
        await copy('rollout_tasks', 'rollout_id = ANY($1::text[])', [rollouts]);
        await copy('samples', 'rollout_id = ANY($1::text[])', [rollouts]);
      }
      const sessions = [...new Set([...named, ...(db.prepare(`SELECT session_id FROM samples WHERE session_id IS NOT NULL`).pluck().all() as string[])])];
      // A few sessions at a time: each statement stays a lookup by index however large the rollout.
      for (const batch of chunks(sessions, SESSIONS_PER_STATEMENT)) {
        await copy('sessions', 'id = ANY($1::text[])', [batch]);
        if (scope.calls === false) continue;
        await copy('requests', 'session_id = ANY($1::text[])', [batch]);
        const calls = db.prepare(`SELECT id FROM requests WHERE session_id IN (SELECT value FROM json_each(?))`).pluck().all(JSON.stringify(batch)) as string[];
        await copy('request_bodies', 'request_id = ANY($1::text[])', [calls]);
      }
      if (scope.calls !== false) await copyBases(db, copy);
    });
    return counts;
  } catch (err) {
    closeDb(db);
    removeScopedFile(file);
    throw err;
  } finally {
    if (db.open) {
      db.pragma('foreign_keys = ON');
      closeDb(db);
    }
  }
}

type Copy = (table: string, where: string, params: readonly unknown[]) => Promise<void>;

/**
 * Copies the rows `where` selects. A table with a one-column key: the keys first (an index lookup
 * on what `where` names, no order, no limit), then the rows by key, a page at a time. Paging in key
 * order as the mirror does (ORDER BY key LIMIT n) let PostgreSQL walk the whole primary key and
 * filter: a rollout's calls, scattered over the key space, cost a read of every call in the store.
 * The others (a rollout's tasks and groups, keyed by the rollout first) are read whole.
 */
async function copyScoped(tx: PgQueryable, db: Db, table: TableSpec, where: string, params: readonly unknown[]): Promise<number> {
  const into = upsertInto(db, table);
  const select = `SELECT ${into.columns.join(', ')} FROM ${table.name}`;
  if (table.key.length !== 1) {
    const { rows } = await tx.query(`${select} WHERE ${where}`, params);
    into.write(rows);
    return rows.length;
  }
  const key = table.key[0]!;
  const keys = (await tx.query(`SELECT ${key} FROM ${table.name} WHERE ${where}`, params)).rows.map((r) => r[key]);
  for (const page of chunks(keys, ROWS_PER_PAGE)) into.write((await tx.query(`${select} WHERE ${key} = ANY($1::text[])`, [page])).rows);
  return keys.length;
}

const ROWS_PER_PAGE = 500;

/**
 * The calls others are stored against that are not here yet: a delta's base is the same agent's
 * previous call (call-chains.ts), so normally none; but a reference must never dangle, so any
 * that does is fetched by id, until none is left.
 */
async function copyBases(db: Db, copy: Copy): Promise<void> {
  const missing = db.prepare(
    `SELECT prompt_base FROM requests WHERE prompt_base IS NOT NULL AND prompt_base NOT IN (SELECT id FROM requests)
     UNION SELECT original_base FROM request_bodies WHERE original_base IS NOT NULL AND original_base NOT IN (SELECT request_id FROM request_bodies)
     UNION SELECT upstream_base FROM request_bodies WHERE upstream_base IS NOT NULL AND upstream_base NOT IN (SELECT request_id FROM request_bodies)`,
  );
  const asked = new Set<string>();
  for (;;) {
    // A base PostgreSQL does not hold (yet) is asked for once: the reader says what it lacks, as from the mirror.
    const ids = (missing.pluck().all() as string[]).filter((id) => !asked.has(id));
    if (ids.length === 0) return;
    for (const id of ids) asked.add(id);
    await copy('requests', 'id = ANY($1::text[])', [ids]);
    await copy('request_bodies', 'request_id = ANY($1::text[])', [ids]);
  }
}

const SESSIONS_PER_STATEMENT = 100;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function spec(table: string): TableSpec {
  const found = SHARED_TABLES.find((t) => t.name === table);
  if (!found) throw new Error(`${table} is not a shared table`);
  return found;
}

/**
 * A new file for one scoped read, under the state folder's `scoped/` (private, like the mirror: it
 * holds prompts and replies). Files a reader left behind (killed before it closed) are removed
 * once they are a day old.
 */
export function newScopedFile(stateDir: string): string {
  const dir = path.join(stateDir, 'scoped');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const dayAgo = Date.now() - 24 * 3600_000;
  for (const name of fs.readdirSync(dir)) {
    const at = path.join(dir, name);
    try {
      if (fs.statSync(at).mtimeMs < dayAgo) fs.rmSync(at, { force: true });
    } catch {
      // another reader removed it first
    }
  }
  return path.join(dir, `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}.db`);
}

export function removeScopedFile(file: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) fs.rmSync(file + suffix, { force: true });
}
