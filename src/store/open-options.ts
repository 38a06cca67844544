import type { OpenDbOptions } from './db.js';

/**
 * Options for opening a store by name. Its own module so that open.ts (which picks a SQLite file or
 * a shared PostgreSQL store) and postgres/open.ts (which opens the shared one) both use it without
 * importing each other.
 */
export interface OpenStoreOptions extends OpenDbOptions {
  /** Where a shared store reports that PostgreSQL went away or came back. */
  onNotice?: (line: string) => void;
  /**
   * A reader of a shared store that names what it reads: only those rows are pulled from
   * PostgreSQL (postgres/scoped.ts), not the whole store. Ignored for a SQLite file and for writers.
   */
  scope?: ReadScope;
}

/**
 * What a reader reads: rollouts (their samples and the sessions of their final attempts) and
 * sessions (with the sample each is an attempt of). A scoped store holds nothing else: a reader
 * given one must not look beyond it.
 */
export interface ReadScope {
  rollouts?: readonly string[];
  sessions?: readonly string[];
  /** The sessions' calls and their bodies (default true); `rollout status` needs none. */
  calls?: boolean;
}
