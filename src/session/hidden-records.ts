import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { isPostgresUrl, localStateDir } from '../store/postgres/url.js';

/**
 * polar's own records inside the folder a run makes writable (`polar run` in a project whose
 * `./polar.db` is the default database): the database with its WAL and shared-memory files, and the
 * `.polar/` state folder (other runs' homes and logs, the session-key master, the admin token). The
 * agent must neither read other sessions nor rewrite its own record, so the sandbox hides them; the
 * session's own home under `.polar/runs/` is mounted on top again.
 */
export function recordsUnder(cwd: string, dbPath: string): { path: string; dir: boolean }[] {
  const root = realOr(path.resolve(cwd));
  const inside = (p: string) => {
    const r = realOr(p);
    return r === root || r.startsWith(`${root}/`);
  };
  const state = path.join(localStateDir(dbPath), '.polar');
  const found: { path: string; dir: boolean }[] = [];
  if (existsSync(state) && inside(state)) found.push({ path: realOr(state), dir: true });
  if (!isPostgresUrl(dbPath)) {
    for (const suffix of ['', '-wal', '-shm', '-journal']) {
      const file = path.resolve(dbPath + suffix);
      if (existsSync(file) && inside(file)) found.push({ path: realOr(file), dir: false });
    }
  }
  return found;
}

function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}
