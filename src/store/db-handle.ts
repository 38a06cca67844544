import type Database from 'better-sqlite3';

/**
 * An open SQLite database. Its own file so that the migrations (migrations.ts, migrate-deltas.ts)
 * can name it without importing db.ts, which imports them to run them.
 */
export type Db = Database.Database;
