import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';

/**
 * What went wrong with a database file, said as its cause and its fix, for the conditions a user
 * meets (a full disk, a read-only mount, a file or folder they may not write): SQLite reports them
 * as `database or disk is full`, `unable to open database file` or `attempt to write a readonly
 * database`, naming neither the file nor why. Null for anything else, which stays as it was.
 *
 * The HTTP status is what a harness gets when the proxy cannot record its call: 507 (insufficient
 * storage) for a full disk, 503 for a database that cannot be written at all.
 */
export function storeFileError(file: string, err: unknown): PolarError | null {
  if (err instanceof PolarError) return null;
  const code = errorCode(err);
  if (!code) return null;
  const message = (err as Error).message;
  if (code === 'ENOSPC' || code === 'EDQUOT' || code.startsWith('SQLITE_FULL')) {
    return new PolarError('POLAR_STORE_WRITE', `disk full: ${file} (${message}); free space on its disk or pass --db a file on another`, 507, { cause: err });
  }
  const problem = fileProblem(file);
  if (code === 'EROFS' || problem === 'EROFS' || (code.startsWith('SQLITE_READONLY') && problem === null)) {
    return new PolarError(
      'POLAR_STORE_WRITE',
      `read-only file system: ${file} cannot be written (${message}); polar writes beside the database even to read it (its -wal and -shm files): remount the disk read-write, or copy the file to a writable folder and pass --db the copy`,
      503,
      { cause: err },
    );
  }
  if (code === 'EACCES' || code === 'EPERM' || problem === 'EACCES' || problem === 'EPERM') {
    return new PolarError(
      'POLAR_STORE_WRITE',
      `permission denied: ${file} or its folder cannot be written by this user (${message}); run polar as the file's owner, or pass --db a file you can write`,
      503,
      { cause: err },
    );
  }
  if (code.startsWith('SQLITE_CANTOPEN') || code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') {
    return new PolarError('POLAR_STORE_WRITE', `cannot open the database ${file} (${message}): does its folder exist, and is it a file?`, 503, { cause: err });
  }
  if (code.startsWith('SQLITE_IOERR')) {
    return new PolarError('POLAR_STORE_WRITE', `disk error writing ${file} (${message}); check the disk (dmesg) and the free space`, 503, { cause: err });
  }
  return null;
}

/** `storeFileError`, or the error as it was. */
export function explainStoreError(file: string, err: unknown): unknown {
  return storeFileError(file, err) ?? err;
}

function errorCode(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : null;
}

/**
 * Why the database's folder (and the file, when it exists) cannot be written, as an errno code;
 * null when they can. access(2) says EROFS for a read-only mount even to root.
 */
function fileProblem(file: string): string | null {
  if (file === ':memory:' || file === '') return null;
  const targets = [path.dirname(path.resolve(file))];
  if (fs.existsSync(file)) targets.push(file);
  for (const target of targets) {
    try {
      fs.accessSync(target, fs.constants.W_OK);
    } catch (err) {
      const code = errorCode(err);
      if (code && code !== 'ENOENT') return code;
    }
  }
  return null;
}
