import fs from 'node:fs';

/**
 * What a path is, as a yes or no that never throws: a missing path, or one polar may not stat, is
 * none of these. `isDir`/`isFile` follow links (what a copy or a mount would reach); `isLink` does not.
 */
export function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

export function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

export function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
