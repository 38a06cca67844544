import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { removeTree } from './remove-tree.js';

/**
 * A real small file system for the disk tests: a tmpfs of `sizeKiB` mounted on a fresh folder.
 * Needs root (or CAP_SYS_ADMIN); `mountable` says whether this machine allows it, and why not.
 */
export interface Tmpfs {
  dir: string;
  /** Fills what is left of it with one file, which `free` removes. */
  fill(): void;
  free(): void;
  readOnly(): void;
  readWrite(): void;
  unmount(): void;
}

export const mountable: string | null = (() => {
  if (process.platform !== 'linux') return 'tmpfs mounts are Linux only';
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root';
  const probe = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tmpfs-probe-'));
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { encoding: 'utf8' });
  if (r.status === 0) spawnSync('umount', [probe]);
  fs.rmdirSync(probe);
  return r.status === 0 ? null : `mount -t tmpfs is not permitted here: ${(r.stderr || r.error?.message || '').trim()}`;
})();

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr.trim()}`);
}

export function mountTmpfs(sizeKiB: number): Tmpfs {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-tmpfs-'));
  sh('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k,mode=0755`, 'tmpfs', dir]);
  const filler = path.join(dir, 'filler');
  return {
    dir,
    fill() {
      // Written until the disk refuses: ENOSPC ends the loop.
      const fd = fs.openSync(filler, 'a');
      const block = Buffer.alloc(4096, 1);
      try {
        for (;;) fs.writeSync(fd, block);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      } finally {
        fs.closeSync(fd);
      }
    },
    free() {
      fs.rmSync(filler, { force: true });
    },
    readOnly() {
      sh('mount', ['-o', 'remount,ro', dir]);
    },
    readWrite() {
      sh('mount', ['-o', 'remount,rw', dir]);
    },
    unmount() {
      spawnSync('umount', ['-l', dir]);
      removeTree(dir);
    },
  };
}
