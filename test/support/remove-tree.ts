import fs from 'node:fs';

/**
 * Removes a test's temporary file or folder, tolerating a late writer.
 *
 * A child that outlived its test (killed by a timeout, a sandbox's process still flushing a log)
 * can add a file while the folder is being emptied: a plain recursive rm then fails with ENOTEMPTY
 * and the cleanup, not the test, is reported. Node's rm retries ENOTEMPTY, EBUSY, EMFILE, ENFILE and
 * EPERM with a growing pause (retryDelay × attempt), about 5 s in all here. Kill and wait for the
 * child first where there is one: this only covers what is still settling.
 */
export function removeTree(target: string): void {
  fs.rmSync(target, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
