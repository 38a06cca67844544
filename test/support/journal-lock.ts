import type { Postgres } from '../../src/store/postgres/client.js';
import type { Store } from '../../src/store/store.js';

/**
 * Holds the lock a journal's shipper takes (ship.ts), as another process shipping the same journal
 * would, until `release`; `done` resolves once it is let go.
 */
export async function holdJournal(pg: Postgres, store: Store): Promise<{ release: () => void; done: Promise<void> }> {
  const origin = store.db.prepare(`SELECT value FROM polar_journal WHERE key = 'origin'`).pluck().get() as string;
  let release = () => {};
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const done = pg.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`polar-ship:${origin}`]);
    locked();
    await new Promise<void>((r) => (release = r));
  });
  await isLocked;
  return { release: () => release(), done };
}
