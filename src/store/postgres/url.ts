import os from 'node:os';
import path from 'node:path';

/* What naming a shared store takes, without loading a PostgreSQL client: every command checks its
   --db with these, and only a postgres:// one loads `pg`. */

/** `postgres://` or `postgresql://`: where polar takes a database path, it takes these too. */
export function isPostgresUrl(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/** The URL as it may be printed or stored: the password replaced. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

/**
 * Where this machine keeps its state for a shared store (journal, mirror, harness run folders):
 * `$POLAR_STATE_DIR`, else `$XDG_STATE_HOME/polar`, else `~/.local/state/polar`.
 */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POLAR_STATE_DIR) return path.resolve(env.POLAR_STATE_DIR);
  if (env.XDG_STATE_HOME) return path.join(env.XDG_STATE_HOME, 'polar');
  return path.join(os.homedir(), '.local', 'state', 'polar');
}

/** The folder beside a database where polar keeps per-run files: the file's folder, or the state folder. */
export function localStateDir(target: string): string {
  return isPostgresUrl(target) ? stateDir() : path.dirname(path.resolve(target));
}

/** A database as polar prints it: a file as given, a URL without its password. */
export function displayDb(target: string): string {
  return isPostgresUrl(target) ? redactUrl(target) : target;
}
