import fs from 'node:fs';
import { AuditTable } from './audit.js';
import { closeDb, migrate, openDb, type Db, type OpenDbOptions } from './db.js';
import { explainStoreError } from './file-errors.js';
import { MIGRATIONS } from './migrations.js';
import { NOTHING, OwnersTable, type ReconcileResult } from './owners.js';
import { RequestsTable } from './requests.js';
import { RolloutsTable } from './rollouts.js';
import { SessionsTable } from './sessions.js';

/**
 * One open polar database: its sessions and requests tables. Pass it around; there is no global one.
 * A writable store registers this process as an owner, stamps what it writes with it, and first
 * reconciles what crashed processes left unfinished (see owners.ts).
 */
export class Store {
  readonly sessions: SessionsTable;
  readonly requests: RequestsTable;
  readonly rollouts: RolloutsTable;
  /** Calls refused for want of a session's capability: never in any session (audit.ts). */
  readonly audit: AuditTable;
  readonly owners: OwnersTable | null;
  /** This process's owner id; null for a read-only store. */
  readonly ownerId: number | null;
  /** What reconciling at open found. */
  readonly reconciled: ReconcileResult;

  constructor(readonly db: Db) {
    this.owners = db.readonly ? null : new OwnersTable(db);
    this.ownerId = this.owners ? this.owners.register() : null;
    this.reconciled = this.owners ? this.owners.reconcile(this.ownerId) : { ...NOTHING };
    this.sessions = new SessionsTable(db, this.ownerId);
    this.requests = new RequestsTable(db, this.ownerId);
    this.rollouts = new RolloutsTable(db, this.ownerId);
    this.audit = new AuditTable(db);
  }

  static open(file: string, options?: OpenDbOptions): Store {
    if (options?.readonly) reconcileFile(file);
    let db: Db | undefined;
    try {
      db = openDb(file, options);
      return new Store(db);
    } catch (err) {
      // A full disk or a read-only mount, said as such with the file and the fix (file-errors.ts).
      if (db?.open) db.close();
      throw explainStoreError(file, err);
    }
  }

  /** The database file (SQLite's name for it; a shared store's journal). */
  get file(): string {
    return this.db.name;
  }

  /**
   * What runs after this process's last write and before the file closes: a shared store's
   * shipper sends the journal's last rows (postgres/open.ts). Set by whoever opened the store.
   */
  beforeClose: (() => Promise<void>) | null = null;
  /**
   * Resolves once every row this process committed so far has reached the shared store, so what
   * PostgreSQL says next (a sample's end) is never read before the calls behind it; throws
   * POLAR_STORE_UNREACHABLE when some are still waiting after `timeoutMs` (POLAR_SHIP_TIMEOUT_MS).
   * Null for a file, whose commits are already where readers look. Set by postgres/open.ts.
   */
  shipCommitted: ((timeoutMs?: number) => Promise<void>) | null = null;
  /** The database as the user named it (a file, or a postgres:// URL without its password). */
  label: string | null = null;

  /** Ends this process's ownership (see OwnersTable.close) and closes the file. */
  close(): void {
    this.release();
    closeDb(this.db);
  }

  /**
   * Like close, but first lets `beforeClose` finish: writers of a shared store close this way so
   * their last calls reach PostgreSQL before the process exits.
   */
  async closeAsync(): Promise<void> {
    this.release();
    const hook = this.beforeClose;
    this.beforeClose = null;
    if (hook) await hook();
    closeDb(this.db);
  }

  private release(): void {
    if (this.db.open && this.owners && this.ownerId !== null) {
      try {
        this.owners.close(this.ownerId);
      } catch {
        // a database that can no longer be written keeps the owner open; the next opener reconciles it
      }
    }
  }
}

/**
 * Before a command reads a database, it is brought to the current schema (a database written by an
 * older polar) and what crashed processes left unfinished is reconciled, so every reader sees
 * `interrupted` rather than calls that look in progress forever. Best effort: a database this user
 * cannot write is read as it is.
 */
export function reconcileFile(file: string): ReconcileResult | null {
  if (file === ':memory:' || !fs.existsSync(file)) return null;
  try {
    fs.accessSync(file, fs.constants.W_OK);
  } catch {
    return null;
  }
  let db: Db | undefined;
  try {
    db = openDb(file, { reconcileOnly: true });
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version === 0) return null; // not a polar database (yet)
    if (version < MIGRATIONS.length) migrate(db);
    return new OwnersTable(db).reconcile(null);
  } catch {
    return null;
  } finally {
    if (db) closeDb(db, { checkpoint: false });
  }
}

/** Where `--db` points when not given: `$POLAR_DB`, else `./polar.db`. */
export function defaultDbPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.POLAR_DB && env.POLAR_DB.length > 0 ? env.POLAR_DB : 'polar.db';
}
