import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { PolarError } from '../core/errors.js';
import type { Db } from './db-handle.js';
import { MIGRATIONS } from './migrations.js';

export type { Db } from './db-handle.js';

export interface OpenDbOptions {
  /** Wait this long for another polar process's write lock before failing (ms). */
  busyTimeoutMs?: number;
  readonly?: boolean;
  /**
   * Open an existing file for writing without creating, tuning or migrating it: for reconciling
   * crashed processes' rows before a read-only command reads it.
   */
  reconcileOnly?: boolean;
}

/**
 * Opens (creating if needed) a polar database: WAL so readers never block the proxy's writes,
 * `synchronous=NORMAL` (in WAL mode a commit survives a killed process; only power loss can
 * lose the last transactions), a busy timeout so several polar processes share one file, and
 * migrations up to the current schema. A new file is created 0600: it holds prompts and replies.
 */
export function openDb(file: string, options: OpenDbOptions = {}): Db {
  if (options.reconcileOnly) {
    const db = new Database(file, { fileMustExist: true });
    db.pragma('busy_timeout = 2000');
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > MIGRATIONS.length) {
      db.close();
      throw newerSchema(file, version);
    }
    return db;
  }
  const inMemory = file === ':memory:';
  if (!inMemory && !options.readonly) createPrivateFile(file);
  if (!inMemory && options.readonly && !fs.existsSync(file)) {
    throw new PolarError('POLAR_USAGE', `no polar database at ${file}; pass --db FILE or set POLAR_DB`);
  }
  const db = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
  db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 10_000))}`);
  if (!options.readonly) {
    // 4 KiB pages (SQLite's default). A commit writes each page it touched whole into the WAL (and
    // a checkpoint copies it again), and with deltas (delta.ts) an agent's call after its first
    // carries only the new turn: 16 KiB pages made those commits ~2× as costly (~1.2 vs ~0.6 ms per
    // call) for ~15% off a session's first, whole row. Only takes effect on a new, empty file.
    db.pragma('page_size = 4096');
    db.pragma('journal_mode = WAL');
    // Checkpoint every ~4 MiB of WAL (SQLite's default 1,000 pages assumes 4 KiB pages): the
    // commit that triggers a checkpoint copies the WAL inline, and 16 MiB copies stalled a call
    // for ~50 ms where 4 MiB stalls it for ~10.
    db.pragma(`wal_autocheckpoint = ${Math.ceil((4 * 1024 * 1024) / (db.pragma('page_size', { simple: true }) as number))}`);
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    migrate(db);
  } else {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > MIGRATIONS.length) throw newerSchema(file, version);
    if (version < MIGRATIONS.length) {
      // A file another polar process has just created and not yet migrated, or one written by an
      // older polar that this user cannot write (reconcileFile brings writable ones up to date).
      db.close();
      throw new PolarError(
        'POLAR_USAGE',
        version === 0
          ? `${file} is not a polar database yet (empty, or still being created by another polar process); try again once it has recorded something`
          : `${file} has schema version ${version}, older than this polar's (${MIGRATIONS.length}), and cannot be upgraded read-only; open it once with write access (e.g. polar sessions as its owner)`,
      );
    }
  }
  return db;
}

/**
 * Brings a database to schema `version` exactly (for tests that build databases as older polar
 * versions wrote them); `migrate` is what every open runs.
 */
export function migrateTo(db: Db, version: number): void {
  const keys = db.pragma('foreign_keys', { simple: true }) as number;
  db.pragma('foreign_keys = OFF');
  try {
    for (let i = db.pragma('user_version', { simple: true }) as number; i < version; i++) {
      db.transaction(() => apply(db, i))();
    }
  } finally {
    db.pragma(`foreign_keys = ${keys ? 'ON' : 'OFF'}`);
  }
}

export function migrate(db: Db): number {
  let version = db.pragma('user_version', { simple: true }) as number;
  if (version > MIGRATIONS.length) throw newerSchema(db.name, version);
  if (version === MIGRATIONS.length) return version;
  // Rebuilding a table (the only way SQLite changes a constraint) drops the old one, which with
  // foreign keys on would first delete its rows' children; the pragma is a no-op inside a
  // transaction, so it is switched here, around the upgrade, and the keys are checked after each step.
  // All steps run in one transaction: BEGIN IMMEDIATE takes the write lock first, so two processes
  // opening a new file at once cannot both run migration 1, and a reader (polar sessions, or a
  // rollout's watcher) sees the file at its old version or at the current one, never half-upgraded.
  const upgrade = db.transaction(() => {
    for (let i = db.pragma('user_version', { simple: true }) as number; i < MIGRATIONS.length; i++) {
      apply(db, i);
      const broken = db.pragma('foreign_key_check') as unknown[];
      if (broken.length > 0) throw new PolarError('POLAR_STORE_WRITE', `migration ${i + 1} left ${broken.length} rows with a missing parent`);
    }
  });
  const keys = db.pragma('foreign_keys', { simple: true }) as number;
  db.pragma('foreign_keys = OFF');
  try {
    upgrade.immediate();
  } finally {
    db.pragma(`foreign_keys = ${keys ? 'ON' : 'OFF'}`);
  }
  version = db.pragma('user_version', { simple: true }) as number;
  return version;
}

function apply(db: Db, index: number): void {
  const migration = MIGRATIONS[index]!;
  if (typeof migration === 'string') db.exec(migration);
  else migration(db);
  db.pragma(`user_version = ${index + 1}`);
}

export function closeDb(db: Db, options: { checkpoint?: boolean } = {}): void {
  if (!db.open) return;
  if (!db.readonly && options.checkpoint !== false) {
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // another process holds the database; its own close will checkpoint
    }
  }
  db.close();
}

function createPrivateFile(file: string): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  try {
    // 'wx' creates only if absent, so an existing database keeps the mode its owner gave it.
    fs.closeSync(fs.openSync(file, 'wx', 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

function newerSchema(file: string, version: number): PolarError {
  return new PolarError('POLAR_USAGE', `${file} has schema version ${version}, newer than this polar understands (${MIGRATIONS.length}); upgrade polar`);
}
