import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/store/db.js';
import type { Db } from '../../src/store/db.js';
import { Postgres } from '../../src/store/postgres/client.js';
import { migratePostgres } from '../../src/store/postgres/schema.js';
import { sharedColumns, SHARED_TABLES } from '../../src/store/postgres/tables.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';

/**
 * The shared tables have one meaning in both stores: SQLite (store/migrations.ts) and PostgreSQL
 * (store/postgres/schema.ts) each define them, and each is an append-only history of migrations that
 * existing databases are brought up by, so neither can be generated from a single column list (a
 * third definition beside the two histories would drift the same way). Instead both live schemas,
 * a fresh SQLite database's and a migrated PostgreSQL one's, are compared column by column: name,
 * type class (INTEGER ↔ BIGINT, REAL ↔ DOUBLE PRECISION, BLOB ↔ BYTEA, TEXT ↔ TEXT), nullability,
 * default, and the values a CHECK (col IN (…)) allows. What differs on purpose (schema.ts says why)
 * is left out: `owner_id` (per machine), `origin` and `_xid` (PostgreSQL's own), foreign keys and
 * UNIQUE (session_id, seq).
 */

interface ColumnFacts {
  type: string;
  notNull: boolean;
  default: string | null;
  /** The values a CHECK (col IN (…)) allows, sorted; null without one. */
  allowed: string[] | null;
}

type TableFacts = Map<string, ColumnFacts>;

const SQLITE_TYPES: Record<string, string> = { INTEGER: 'integer', REAL: 'float', BLOB: 'bytes', TEXT: 'text' };
const PG_TYPES: Record<string, string> = { bigint: 'integer', integer: 'integer', 'double precision': 'float', bytea: 'bytes', text: 'text' };
/** PostgreSQL's own columns (schema.ts): the journal a row came from and the transaction that wrote it. */
const PG_ONLY = new Set(['origin', '_xid']);

function sqliteTable(db: Db, table: string): TableFacts {
  const shared = new Set(sharedColumns(db, table));
  const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`).get(table) as { sql: string }).sql;
  const allowed = new Map<string, string[]>();
  for (const m of sql.matchAll(/CHECK\s*\(\s*(\w+)\s+IN\s*\(([^)]*)\)\s*\)/g)) allowed.set(m[1]!, [...m[2]!.matchAll(/'([^']*)'/g)].map((v) => v[1]!).sort());
  const rows = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string; type: string; notnull: number; dflt_value: string | null; pk: number }[];
  return new Map(
    rows
      .filter((c) => shared.has(c.name))
      .map((c) => [
        c.name,
        {
          type: SQLITE_TYPES[c.type.toUpperCase()] ?? `sqlite ${c.type}`,
          // SQLite lets a non-INTEGER primary key hold NULL (a legacy quirk); polar always sets keys, and PostgreSQL's are NOT NULL.
          notNull: c.notnull === 1 || c.pk > 0,
          default: c.dflt_value,
          allowed: allowed.get(c.name) ?? null,
        },
      ]),
  );
}

async function pgTable(pg: Postgres, table: string): Promise<TableFacts> {
  const { rows } = await pg.query(
    `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  const checks = await pg.query(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'`, [table]);
  const allowed = new Map<string, string[]>();
  for (const { def } of checks.rows as { def: string }[]) {
    // CHECK ((status = ANY (ARRAY['in_progress'::text, 'ok'::text, …])))
    const column = /^CHECK \(+(\w+) = ANY/.exec(def)?.[1];
    if (column) allowed.set(column, [...def.matchAll(/'([^']*)'::/g)].map((v) => v[1]!).sort());
  }
  return new Map(
    (rows as { column_name: string; data_type: string; is_nullable: string; column_default: string | null }[])
      .filter((c) => !PG_ONLY.has(c.column_name))
      .map((c) => [
        c.column_name,
        {
          type: PG_TYPES[c.data_type] ?? `postgres ${c.data_type}`,
          notNull: c.is_nullable === 'NO',
          // '{}'::text is SQLite's '{}'.
          default: c.column_default?.replace(/::[a-z ]+$/, '') ?? null,
          allowed: allowed.get(c.column_name) ?? null,
        },
      ]),
  );
}

/** Every way the two tables differ, one line each, in the SQLite schema's column order. */
function differences(table: string, sqlite: TableFacts, pg: TableFacts): string[] {
  const out: string[] = [];
  for (const [name, s] of sqlite) {
    const p = pg.get(name);
    if (!p) {
      out.push(`${table}.${name}: in SQLite only`);
      continue;
    }
    for (const key of ['type', 'notNull', 'default', 'allowed'] as const) {
      const [a, b] = [JSON.stringify(s[key]), JSON.stringify(p[key])];
      if (a !== b) out.push(`${table}.${name}: ${key} ${a} in SQLite, ${b} in PostgreSQL`);
    }
  }
  for (const name of pg.keys()) if (!sqlite.has(name)) out.push(`${table}.${name}: in PostgreSQL only`);
  return out;
}

let server: TestPostgres;
let sqlite: Db;

beforeAll(async () => {
  server = await startTestPostgres();
  sqlite = openDb(':memory:');
}, 120_000);

afterAll(async () => {
  sqlite?.close();
  await server?.close();
});

async function migrated(name: string): Promise<Postgres> {
  const pg = new Postgres(await server.database(name));
  await migratePostgres(pg);
  return pg;
}

describe('SQLite and PostgreSQL schemas', () => {
  it('agree column by column on every shared table: name, type class, nullability, default, allowed values', async () => {
    const pg = await migrated('schema_agree');
    try {
      const requests = sqliteTable(sqlite, 'requests');
      // The comparison sees what it should: the token arrays, a default, a CHECK.
      expect(requests.get('prompt_ids')).toEqual({ type: 'bytes', notNull: false, default: null, allowed: null });
      expect(requests.get('agent_id')).toEqual({ type: 'text', notNull: true, default: "'main'", allowed: null });
      expect(requests.get('status')?.allowed).toEqual(['aborted', 'error', 'in_progress', 'interrupted', 'ok']);
      for (const spec of SHARED_TABLES) {
        const [s, p] = [sqliteTable(sqlite, spec.name), await pgTable(pg, spec.name)];
        expect(s.size, spec.name).toBeGreaterThan(0);
        expect(differences(spec.name, s, p), spec.name).toEqual([]);
      }
    } finally {
      await pg.close();
    }
  });

  it('names each way a PostgreSQL requests table can drift from the SQLite one', async () => {
    const pg = await migrated('schema_drift');
    try {
      const check = (
        await pg.query(`SELECT conname FROM pg_constraint WHERE conrelid = 'requests'::regclass AND pg_get_constraintdef(oid) LIKE '%prompt_render%'`)
      ).rows[0] as { conname: string };
      await pg.query(`
        ALTER TABLE requests ALTER COLUMN agent_id DROP DEFAULT;
        ALTER TABLE requests ALTER COLUMN http_status TYPE TEXT;
        ALTER TABLE requests ALTER COLUMN reply SET NOT NULL;
        ALTER TABLE requests DROP CONSTRAINT ${check.conname};
        ALTER TABLE requests DROP COLUMN token_digest;
        ALTER TABLE requests ADD COLUMN extra TEXT;
      `);
      expect(differences('requests', sqliteTable(sqlite, 'requests'), await pgTable(pg, 'requests'))).toEqual([
        `requests.agent_id: default "'main'" in SQLite, null in PostgreSQL`,
        'requests.http_status: type "integer" in SQLite, "text" in PostgreSQL',
        'requests.reply: notNull false in SQLite, true in PostgreSQL',
        'requests.prompt_render: allowed ["bridged","full"] in SQLite, null in PostgreSQL',
        'requests.token_digest: in SQLite only',
        'requests.extra: in PostgreSQL only',
      ]);
    } finally {
      await pg.close();
    }
  });
});
