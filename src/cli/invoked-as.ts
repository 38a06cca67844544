import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where polar runs from and where the user stands, for `invokedAs` (tests give their own). */
export interface InvokedFrom {
  /** This package's root (its package.json and bin/polar.js). */
  packageRoot?: string;
  cwd?: string;
}

/**
 * How the user can run polar again, for the commands polar prints for pasting. Plain `polar` unless
 * polar runs under npx (npm exec), where the name on the command line is resolved by npm, not by the
 * shell: `npx polar` finds this polar only from inside its own checkout (npm exec runs the current
 * project's own bin) or from a project that installed it (node_modules/.bin/polar); anywhere else
 * npm fetches the unrelated registry package `polar`. So:
 * - polar in npx's cache (the user ran `npx polar-rollout`): `npx polar-rollout`, which runs its one bin;
 * - the cwd inside this checkout, or a project whose node_modules/.bin/polar is this polar: `npx polar`;
 * - otherwise: `node <this polar's bin/polar.js>`, which works from anywhere.
 */
export function invokedAs(env: NodeJS.ProcessEnv = process.env, from: InvokedFrom = {}): string {
  if (!(env.npm_command === 'exec' || env.npm_lifecycle_event === 'npx')) return 'polar';
  const root = real(from.packageRoot ?? fileURLToPath(new URL('../../', import.meta.url)));
  if (root.split(path.sep).includes('_npx')) return `npx ${packageName(root)}`;
  const cwd = real(from.cwd ?? process.cwd());
  const bin = path.join(root, 'bin', 'polar.js');
  if (cwd === root || cwd.startsWith(root + path.sep)) return 'npx polar';
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const link = path.join(dir, 'node_modules', '.bin', 'polar');
    if (fs.existsSync(link)) {
      // npx takes the nearest project's bin: ours, or someone else's `polar`.
      if (real(link) === real(bin)) return 'npx polar';
      break;
    }
    if (dir === path.dirname(dir)) break;
  }
  return `node ${/^[\w./@%+-]+$/.test(bin) ? bin : `'${bin.replace(/'/g, `'\\''`)}'`}`;
}

function packageName(root: string): string {
  try {
    const name = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name?: unknown }).name;
    return typeof name === 'string' ? name : 'polar-rollout';
  } catch {
    return 'polar-rollout';
  }
}

function real(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
