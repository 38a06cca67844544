import { Store } from './store.js';
import type { OpenStoreOptions } from './open-options.js';
import { isPostgresUrl } from './postgres/url.js';

export type { OpenStoreOptions } from './open-options.js';

/**
 * Opens the database a user named with `--db`: a SQLite file, or a shared PostgreSQL store
 * (`postgres://…`). A writer of a shared store writes to this machine's journal and ships from it;
 * a reader reads a mirror brought up to date first (postgres/open.ts). Either way the caller gets
 * the same Store; writers close it with `closeAsync()` so their last rows are shipped.
 */
export async function openStore(target: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (!isPostgresUrl(target)) return Store.open(target, options);
  const { openSharedStore } = await import('./postgres/open.js');
  return openSharedStore(target, options);
}
