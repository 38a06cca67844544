import { openDb } from '../db.js';
import type { OpenStoreOptions } from '../open-options.js';
import { Store } from '../store.js';
import type { Postgres } from './client.js';
import { mirrorPath } from './journal.js';
import { syncMirror } from './mirror.js';
import { migratePostgres } from './schema.js';
import { newScopedFile, pullScoped, removeScopedFile } from './scoped.js';
import { stateDir } from './url.js';

/** insufficient_privilege, read_only_sql_transaction: a reader that may not migrate. */
const READ_ONLY_REFUSALS = new Set(['42501', '25006']);

/**
 * A shared store opened to read: a local polar SQLite file brought up to date from PostgreSQL, then
 * read as a local database. A reader that names what it reads (`options.scope`) gets a file of its
 * own holding only those rows (scoped.ts), removed when it closes; any other reader, this machine's
 * mirror of the whole store, pulled incrementally (mirror.ts). The caller closes `pg` afterwards.
 */
export async function openSharedReader(pg: Postgres, url: string, options: OpenStoreOptions): Promise<Store> {
  // A reader whose role may not write (or a hot standby) reads what is there: the mirror needs
  // nothing of a later schema but the store's id, and copes without it.
  await migratePostgres(pg).catch((err: unknown) => {
    if (!READ_ONLY_REFUSALS.has((err as { code?: string }).code ?? '')) throw err;
  });
  if (!options.scope) {
    const file = mirrorPath(url);
    await syncMirror(pg, file);
    const store = Store.open(file, { readonly: true });
    store.label = pg.label;
    return store;
  }
  const file = newScopedFile(stateDir());
  await pullScoped(pg, file, options.scope);
  let store: Store;
  try {
    store = new ScopedStore(file);
  } catch (err) {
    removeScopedFile(file);
    throw err;
  }
  store.label = pg.label;
  return store;
}

/** A store over one scoped read's file, which goes when the store closes. */
class ScopedStore extends Store {
  constructor(private readonly scopedFile: string) {
    super(openDb(scopedFile, { readonly: true }));
  }

  override close(): void {
    try {
      super.close();
    } finally {
      removeScopedFile(this.scopedFile);
    }
  }

  override async closeAsync(): Promise<void> {
    try {
      await super.closeAsync();
    } finally {
      removeScopedFile(this.scopedFile);
    }
  }
}
