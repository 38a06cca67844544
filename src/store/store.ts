import { closeDb, openDb, type Db, type OpenDbOptions } from './db.js';
import { RequestsTable } from './requests.js';
import { SessionsTable } from './sessions.js';

/** One open polar database: its sessions and requests tables. Pass it around; there is no global one. */
export class Store {
  readonly sessions: SessionsTable;
  readonly requests: RequestsTable;

  constructor(readonly db: Db) {
    this.sessions = new SessionsTable(db);
    this.requests = new RequestsTable(db);
  }

  static open(file: string, options?: OpenDbOptions): Store {
    return new Store(openDb(file, options));
  }

  close(): void {
    closeDb(this.db);
  }
}

/** Where `--db` points when not given: `$POLAR_DB`, else `./polar.db`. */
export function defaultDbPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.POLAR_DB && env.POLAR_DB.length > 0 ? env.POLAR_DB : 'polar.db';
}
