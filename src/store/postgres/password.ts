import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';

/*
 * Where a PostgreSQL password comes from, and where it must never go. A password on a command line
 * is visible to every user of the machine (`ps`, /proc/PID/cmdline), so polar reads it, as libpq
 * does, from PGPASSWORD or the password file (~/.pgpass, or PGPASSFILE), or from
 * `--db-password-file FILE`; a password written inside `--db` still works for the process it was
 * given to, but polar takes it out of any `--db` it hands a child process. Pure, except for reading
 * the files named.
 */

/** The password in a postgres:// URL, decoded, or null. */
export function urlPassword(url: string): string | null {
  try {
    const u = new URL(url);
    return u.password ? decodeURIComponent(u.password) : null;
  } catch {
    return null;
  }
}

/** The URL without its password (unlike redactUrl, nothing in its place): safe for a child's argv. */
export function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** The URL with `password` in it, for this process's own client. */
export function withPassword(url: string, password: string): string {
  const u = new URL(url);
  u.password = encodeURIComponent(password);
  return u.toString();
}

/**
 * A password file (`--db-password-file`): its first line. Like ~/.pgpass under libpq, a file other
 * users can read is refused, since anyone who reads it has the database.
 */
export function readPasswordFile(file: string): string {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    throw new PolarError('POLAR_USAGE', `--db-password-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, undefined, {
      cause: err,
    });
  }
  if ((stat.mode & 0o077) !== 0)
    throw new PolarError('POLAR_USAGE', `--db-password-file ${file} is readable by other users (mode ${(stat.mode & 0o777).toString(8)}): chmod 600 it`);
  const password = fs.readFileSync(file, 'utf8').split(/\r?\n/)[0] ?? '';
  if (password === '') throw new PolarError('POLAR_USAGE', `--db-password-file ${file} is empty`);
  return password;
}

/**
 * The URL this process connects with: as given when it holds a password or PGPASSWORD is set (pg
 * reads PGPASSWORD itself); else with the password file's entry for it, if any. pg 8 also reads
 * ~/.pgpass, but through a path it marks deprecated (a warning on stderr, removed in pg 9), so polar
 * reads the file itself, by libpq's rules.
 */
export function connectionUrl(url: string, env: NodeJS.ProcessEnv = process.env): string {
  if (urlPassword(url) !== null || env.PGPASSWORD) return url;
  const password = pgpassLookup(url, env);
  return password === null ? url : withPassword(url, password);
}

/**
 * The password for `url` in the password file (libpq: PGPASSFILE, else ~/.pgpass; ignored when
 * group or world can read it; lines `host:port:database:user:password`, `*` matches anything, `\`
 * escapes `:` and `\`; the first matching line wins). Null when there is none.
 */
export function pgpassLookup(url: string, env: NodeJS.ProcessEnv = process.env): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const file = env.PGPASSFILE || path.join(env.HOME || os.homedir(), '.pgpass');
  let text: string;
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile() || (stat.mode & 0o077) !== 0) return null;
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const want = [
    u.hostname.replace(/^\[|\]$/g, '') || 'localhost',
    u.port || '5432',
    decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) || env.USER || '',
    decodeURIComponent(u.username) || env.PGUSER || env.USER || '',
  ];
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const fields = splitPgpassLine(line);
    if (fields.length < 5) continue;
    if (want.every((w, i) => fields[i] === '*' || fields[i] === w)) return fields.slice(4).join(':');
  }
  return null;
}

function splitPgpassLine(line: string): string[] {
  const fields: string[] = [];
  let cur = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && i + 1 < line.length) cur += line[++i]!;
    else if (c === ':') {
      fields.push(cur);
      cur = '';
    } else cur += c;
  }
  fields.push(cur);
  return fields;
}
