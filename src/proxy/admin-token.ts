import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { localStateDir } from '../store/postgres/url.js';

/**
 * The token that opens a proxy's `/admin/*` routes when it was started without `--auth-token`.
 * Admin routes never trust "the caller is on this machine" (a sandboxed policy, another user and a
 * web page all are), so `polar proxy` keeps a random token in polar's state folder beside the
 * database, readable by its owner only, for the trainer and local tools to present. One file per
 * state folder, reused by every proxy on that database, so a tool needs no proxy-specific path.
 */
export function adminTokenFile(dbPath: string): string {
  return path.join(localStateDir(dbPath), '.polar', 'admin-token');
}

/** The token in `file`, created (0600, in a 0700 folder) when missing. */
export function loadOrCreateAdminToken(file: string): string {
  const existing = readAdminToken(file);
  if (existing) return existing;
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written whole under a private name, then linked into place: link fails when the file exists, so
  // of two proxies starting at once one token wins and neither reads a half-written file.
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  fs.writeFileSync(tmp, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    fs.linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.unlinkSync(tmp);
  }
  return readAdminToken(file)!;
}

/** The token in `file`, or null when there is none. A file others can read is refused, not used. */
export function readAdminToken(file: string): string | null {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return null;
  }
  if ((stat.mode & 0o077) !== 0) {
    throw new PolarError(
      'POLAR_USAGE',
      `${file} is readable by other users (mode ${(stat.mode & 0o777).toString(8)}); anyone who reads it controls the proxy's admin routes: remove it (a new one is made) or chmod 600 it`,
    );
  }
  const token = fs.readFileSync(file, 'utf8').trim();
  if (token.length < 32) throw new PolarError('POLAR_USAGE', `${file} does not hold an admin token; remove it to make a new one`);
  return token;
}
