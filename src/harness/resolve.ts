import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PolarError } from '../core/errors.js';
import type { Harness } from './types.js';

/**
 * Where a harness binary comes from, first hit wins: `--harness-bin`; polar's own
 * node_modules/.bin (harnesses installed beside polar); the working directory's node_modules/.bin;
 * then PATH. A missing harness is an error that gives the install command.
 */
export async function resolveHarnessBin(harness: Harness, explicit: string | undefined, cwd: string, envPath = process.env.PATH ?? ''): Promise<string> {
  if (explicit) {
    const file = path.resolve(cwd, explicit);
    if (await isExecutable(file)) return file;
    throw new PolarError('POLAR_USAGE', `--harness-bin ${explicit} is not an executable file`);
  }
  const polarRoot = fileURLToPath(new URL('../../', import.meta.url));
  const candidates = [path.join(polarRoot, 'node_modules', '.bin', harness.binName), path.join(cwd, 'node_modules', '.bin', harness.binName)];
  for (const dir of envPath.split(path.delimiter).filter(Boolean)) candidates.push(path.join(dir, harness.binName));
  for (const file of candidates) if (await isExecutable(file)) return file;
  const install = harness.packageName ? `npm install -g ${harness.packageName}` : `put ${harness.binName} on PATH`;
  throw new PolarError(
    'POLAR_USAGE',
    `${harness.name} is not installed (no ${harness.binName} in node_modules/.bin or on PATH): ${install}, or pass --harness-bin PATH`,
  );
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
