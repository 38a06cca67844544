import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { sameSecret } from '../core/same-secret.js';
import { localStateDir } from '../store/postgres/url.js';

/**
 * Per-session capabilities. A session's API key is `polar-<session>~<secret>`, the secret being
 * HMAC-SHA256(master, session) in base64url. `~` is not allowed in session names (ids.ts), so the
 * split is unambiguous. Stateless on purpose: whoever holds the 32-byte master (the proxy, the
 * rollout that started it, `polar run --proxy` on the proxy's machine through the master file) can
 * mint a session's key, and the proxy checks one with a hash and no table, so a key is never
 * written anywhere to be read back. A key proves its session only: HMAC keys one session's secret
 * to its name, so knowing one sibling's key says nothing of another's.
 */
export const SESSION_KEY_PREFIX = 'polar-';
export const SESSION_SECRET_SEPARATOR = '~';

/** Why a call was refused, as stored in the audit table (stable codes). */
export type RefusalReason =
  /** No credential at all. */
  | 'no-key'
  /** `polar-<session>` with no secret: names a session, proves nothing. */
  | 'no-secret'
  /** `polar-<session>~…` whose secret is not that session's. */
  | 'bad-secret'
  /** A valid key, but for another session than the one the call names. */
  | 'wrong-session'
  /** A credential that is neither a session key nor the operator token. */
  | 'unknown-key';

/** A key split into the session it names and the secret it carries (null when it carries none). */
export function parseSessionKey(key: string): { session: string; secret: string | null } | null {
  if (!key.startsWith(SESSION_KEY_PREFIX) || key.length === SESSION_KEY_PREFIX.length) return null;
  const rest = key.slice(SESSION_KEY_PREFIX.length);
  const cut = rest.indexOf(SESSION_SECRET_SEPARATOR);
  if (cut < 0) return { session: rest, secret: null };
  return { session: rest.slice(0, cut), secret: rest.slice(cut + 1) };
}

export class SessionKeys {
  private constructor(private readonly master: Buffer) {}

  /** A fresh master, held in this process's memory only. */
  static random(): SessionKeys {
    return new SessionKeys(randomBytes(32));
  }

  static fromMaster(master: Buffer): SessionKeys {
    if (master.length < 32) throw new PolarError('POLAR_USAGE', 'a session-key master must be at least 32 bytes');
    return new SessionKeys(Buffer.from(master));
  }

  /** The API key a harness in `session` presents. */
  keyFor(session: string): string {
    return `${SESSION_KEY_PREFIX}${session}${SESSION_SECRET_SEPARATOR}${this.secret(session)}`;
  }

  /**
   * Whether the presented credentials prove `session`: null when one does, else the most telling
   * reason none does (a key for another session says more than an unknown token).
   */
  check(presented: readonly string[], session: string): RefusalReason | null {
    if (presented.length === 0) return 'no-key';
    let reason: RefusalReason = 'unknown-key';
    const rank: Record<RefusalReason, number> = { 'no-key': 0, 'unknown-key': 1, 'no-secret': 2, 'bad-secret': 3, 'wrong-session': 4 };
    for (const key of presented) {
      const parsed = parseSessionKey(key);
      if (!parsed) continue;
      let found: RefusalReason;
      if (parsed.secret === null) found = 'no-secret';
      else if (!this.valid(parsed.session, parsed.secret)) found = 'bad-secret';
      else if (parsed.session !== session) found = 'wrong-session';
      else return null;
      if (rank[found] > rank[reason]) reason = found;
    }
    return reason;
  }

  private valid(session: string, secret: string): boolean {
    return sameSecret(secret, this.secret(session));
  }

  private secret(session: string): string {
    // The label keeps this master's MACs from meaning anything to another use of the same bytes.
    return createHmac('sha256', this.master).update(`polar session key\0${session}`).digest('base64url');
  }
}

/**
 * A key of the right shape for `session` with a random secret: what an attacker who knows a
 * sibling's session id (but not the master) can send. For tests and the attack suite.
 */
export function forgedSessionKey(session: string): string {
  return `${SESSION_KEY_PREFIX}${session}${SESSION_SECRET_SEPARATOR}${randomBytes(32).toString('base64url')}`;
}

/**
 * Where `polar proxy --session-keys` keeps its master, so `polar run --proxy` on the same machine
 * (same `--db`) mints keys it accepts: polar's state folder beside the database, like run folders.
 */
export function masterKeyFile(dbPath: string): string {
  return path.join(localStateDir(dbPath), '.polar', 'session-keys.master');
}

/** The master in `file`, created (0600, in a 0700 folder) when missing. */
export function loadOrCreateMaster(file: string): SessionKeys {
  const existing = readMaster(file);
  if (existing) return existing;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written whole to a private temporary name, then linked into place: link fails when the file
  // exists, so of two processes starting at once one master wins and neither reads a half-written one.
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, randomBytes(32).toString('base64url'));
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  chmodSync(file, 0o600);
  return readMaster(file)!;
}

/** The master in `file`, or null when there is none. */
export function readMaster(file: string): SessionKeys | null {
  if (!existsSync(file)) return null;
  const text = readFileSync(file, 'utf8').trim();
  const master = Buffer.from(text, 'base64url');
  if (master.length < 32) throw new PolarError('POLAR_USAGE', `${file} does not hold a session-key master (32 bytes, base64url); remove it to make a new one`);
  return SessionKeys.fromMaster(master);
}
