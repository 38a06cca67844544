import { once } from 'node:events';
import fs from 'node:fs';
import type { Writable } from 'node:stream';

/**
 * Files that hold what polar recorded (reports, exports, reconstructed traces, their stats) are
 * readable by their owner only, like the database they come from (db.ts creates it 0600). Node's
 * `mode` applies only when a file is created, so a file that already exists (a report written
 * again) is narrowed too, through its descriptor, before a byte is written.
 */
export const PRIVATE_MODE = 0o600;

/** Opens `file` for writing (truncated, created 0600), narrowed to 0600 if it already existed. */
export function openPrivate(file: string): number {
  const fd = fs.openSync(file, 'w', PRIVATE_MODE);
  try {
    // Only a regular file is ours to narrow: `--out /dev/null` (or a pipe) is shared, and as root the
    // fchmod would leave /dev/null 0600, unusable to every other user's processes.
    if (fs.fstatSync(fd).isFile()) fs.fchmodSync(fd, PRIVATE_MODE);
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  return fd;
}

export function writePrivateFile(file: string, data: string | Uint8Array): void {
  const fd = openPrivate(file);
  try {
    fs.writeFileSync(fd, data);
  } finally {
    fs.closeSync(fd);
  }
}

/** A write stream on `file`, 0600 as above. */
export function privateWriteStream(file: string): fs.WriteStream {
  return fs.createWriteStream('', { fd: openPrivate(file) });
}

/**
 * Where a command writes its lines: `file` (0600, as above) or stdout when none is named. `end`
 * finishes a file and waits until it is written; stdout is left open.
 */
export function lineOutput(file: string | undefined): { out: Writable; end(): Promise<void> } {
  const out: Writable = file ? privateWriteStream(file) : process.stdout;
  return {
    out,
    async end() {
      if (!file) return;
      out.end();
      await once(out, 'finish');
    },
  };
}
