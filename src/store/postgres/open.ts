import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import type { OpenStoreOptions } from '../open-options.js';
import { Store } from '../store.js';
import { Postgres } from './client.js';
import { journalPath, prepareJournal } from './journal.js';
import { openSharedReader } from './reader.js';
import { migratePostgres } from './schema.js';
import { Shipper } from './ship.js';

/**
 * A shared store as a Store:
 * - writing: this machine's journal (journal.ts), a polar SQLite database every polar process
 *   pointed at this URL shares, so a call commits locally before its last byte reaches the harness,
 *   exactly as with a file; a shipper copies committed rows to PostgreSQL in the background, and on
 *   `closeAsync()` ships what is left (waiting up to `POLAR_SHIP_TIMEOUT_MS`, 10 s by default, for
 *   an unreachable server; rows it could not ship stay in the journal for the next polar process
 *   on this machine). What a crashed process left is reconciled here, as with a file, and shipped.
 * - reading: a local copy pulled up to date first, then read as a local database (reader.ts): this
 *   machine's mirror of the whole store (mirror.ts), or only the rows a reader names (scoped.ts).
 */
/**
 * `pool`: a pool the caller owns and closes (a worker's one pool for its store, ledger and queue),
 * used for migrating and shipping instead of a pool of the store's own; default: a new one of
 * poolSize() connections (`POLAR_PG_POOL`), closed with the store.
 */
export async function openSharedStore(url: string, options: OpenStoreOptions, pool?: Postgres): Promise<Store> {
  const pg = pool ?? new Postgres(url);
  const release = async () => {
    if (!pool) await pg.close();
  };
  try {
    if (options.readonly) {
      // A local file brought up to date, then read as a local database (reader.ts).
      const store = await openSharedReader(pg, url, options);
      await release();
      return store;
    }
    const file = journalPath(url);
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // Migrate PostgreSQL if it is there; a writer also starts while it is briefly unreachable.
    await migratePostgres(pg).catch((err: unknown) => {
      if ((err as { code?: string }).code !== 'POLAR_STORE_UNREACHABLE') throw err;
      options.onNotice?.(`PostgreSQL at ${pg.label} is unreachable; recording to the local journal until it returns`);
    });
    const store = Store.open(file, options);
    const origin = prepareJournal(store.db);
    const shipper = new Shipper(file, pg, origin, {
      ...(options.onNotice ? { onNotice: options.onNotice } : {}),
      onTick: () => store.owners?.reconcile(store.ownerId),
    });
    shipper.start();
    store.label = pg.label;
    const timeout = Number(process.env.POLAR_SHIP_TIMEOUT_MS ?? 10_000);
    store.shipCommitted = async (timeoutMs = timeout) => {
      const left = await shipper.shipCommitted(timeoutMs);
      if (left === 0) return;
      // Refused rather than unreachable: waiting longer will not help, and the error says what will.
      if (shipper.refusal)
        throw new PolarError(
          'POLAR_STORE_WRITE',
          `${left} rows are still waiting in ${file}: PostgreSQL at ${pg.label} refuses them: ${shipper.refusal.message}`,
          500,
        );
      throw new PolarError('POLAR_STORE_UNREACHABLE', `${left} rows are still waiting in ${file} for PostgreSQL at ${pg.label}`, 503);
    };
    store.beforeClose = async () => {
      const left = await shipper.flush(timeout);
      if (left > 0)
        options.onNotice?.(
          `${left} rows are still waiting in ${file} for PostgreSQL at ${pg.label}${shipper.refusal ? ` (it refuses them: ${shipper.refusal.message})` : ''}; the next polar process on this machine ships them`,
        );
      const aside = shipper.setAsideRows(0).count;
      if (aside > 0)
        options.onNotice?.(
          `${aside} ${aside === 1 ? 'row' : 'rows'} PostgreSQL refused ${aside === 1 ? 'is' : 'are'} set aside in ${file}; see them with \`polar db set-aside --db ${pg.label}\`, and ship them again with --retry once the cause is fixed`,
        );
      await shipper.stop();
      await release();
    };
    return store;
  } catch (err) {
    await release().catch(() => undefined);
    throw err;
  }
}
