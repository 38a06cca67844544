import type { OpenDbOptions } from './db.js';

/**
 * Options for opening a store by name. Its own module so that open.ts (which picks a SQLite file or
 * a shared PostgreSQL store) and postgres/open.ts (which opens the shared one) both use it without
 * importing each other.
 */
export interface OpenStoreOptions extends OpenDbOptions {
  /** Where a shared store reports that PostgreSQL went away or came back. */
  onNotice?: (line: string) => void;
}
