import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import type { SandboxKind } from './types.js';

/** `bwrap` when it is installed here, else null. */
export function findBwrap(pathEnv: string | undefined = process.env.PATH): string | null {
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'bwrap');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** The bwrap binary for `kind`, or a usage error that says how to get it ('' with `none`). */
export function requireBwrap(kind: SandboxKind): string {
  if (kind === 'none') return '';
  const bwrap = findBwrap();
  if (!bwrap) throw new PolarError('POLAR_USAGE', '--sandbox bwrap needs bubblewrap (Debian: apt-get install bubblewrap); or pass --sandbox none');
  return bwrap;
}
