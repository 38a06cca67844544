import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Where a rollout run without --out keeps its workspaces: a folder of its own in the temp folder. */
export function defaultOutDir(rolloutId: string): string {
  return path.resolve(os.tmpdir(), `polar-${rolloutId}`);
}

/**
 * A finished rollout's output folder, removed where nothing is left in it: with workspaces removed
 * as samples end, a rollout without --out left an empty `polar-rol_…/{workspaces,scratch}` in the
 * temp folder every time. Only empty folders go (rmdir refuses any other), so kept workspaces
 * (--keep-workspaces) and anything else written there stay, with the folder that holds them.
 */
export function removeEmptyOutDir(outDir: string): boolean {
  for (const dir of [path.join(outDir, 'workspaces'), path.join(outDir, 'scratch'), outDir]) {
    try {
      fs.rmdirSync(dir);
    } catch {
      // not empty, or never made
    }
  }
  return !fs.existsSync(outDir);
}
