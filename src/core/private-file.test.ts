import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writePrivateFile } from './private-file.js';
import { removeTree } from '../../test/support/remove-tree.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-private-file-'));
afterAll(() => removeTree(dir));

describe('writePrivateFile', () => {
  it('narrows a file that already existed to 0600', () => {
    const file = path.join(dir, 'report.html');
    fs.writeFileSync(file, 'old', { mode: 0o644 });
    writePrivateFile(file, 'new');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(file, 'utf8')).toBe('new');
  });

  it('leaves what is not a regular file as it is (`--out /dev/null` as root made /dev/null 0600)', () => {
    // A FIFO stands in for /dev/null: a shared special file, which this test must not risk breaking.
    const fifo = path.join(dir, 'pipe');
    execFileSync('mkfifo', ['-m', '644', fifo]);
    const reader = fs.openSync(fifo, 'r+'); // keeps the pipe open so the write does not block
    try {
      writePrivateFile(fifo, 'x');
      expect(fs.statSync(fifo).mode & 0o777).toBe(0o644);
    } finally {
      fs.closeSync(reader);
    }
  });
});
