import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { verifierFiles, verifierFilesLines } from './verifier-files.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const dirs: string[] = [];
function folder(files: Record<string, string | Buffer>): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-vfiles-'));
  dirs.push(d);
  for (const [f, t] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(d, f)), { recursive: true });
    fs.writeFileSync(path.join(d, f), t);
  }
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) removeTree(d);
});

describe("a Harbor verifier's own files under /logs/verifier", () => {
  it("keeps each file's tail, Harbor's test-stdout.txt first, and not the reward files", async () => {
    const d = folder({
      'reward.txt': '0\n',
      'reward.json': '{"reward": 0}',
      'ctrf.json': '{"results": {}}',
      'test-stdout.txt': `${'x'.repeat(5000)}\nFAILED test_median - assert 2 == 3\n`,
      'sub/pytest.log': 'E   AssertionError\n',
    });
    const files = await verifierFiles(d, []);
    expect(Object.keys(files)).toEqual(['test-stdout.txt', 'ctrf.json', 'sub/pytest.log']);
    expect(files['test-stdout.txt']!.startsWith('…')).toBe(true);
    expect(files['test-stdout.txt']!.length).toBeLessThanOrEqual(2049);
    expect(files['test-stdout.txt']).toMatch(/FAILED test_median - assert 2 == 3\n$/);
    expect(verifierFilesLines(files, 1)).toEqual([
      '/logs/verifier/test-stdout.txt (its last lines):',
      '| FAILED test_median - assert 2 == 3',
      '/logs/verifier/ctrf.json (its last lines):',
      '| {"results": {}}',
      '/logs/verifier/sub/pytest.log (its last lines):',
      '| E   AssertionError',
    ]);
  });

  it("never follows a link the agent's code may have left there, skips binary files, and scrubs secrets", async () => {
    const secretFile = folder({ 'host-secret.txt': 'HOST FILE CONTENTS\n' });
    const d = folder({ 'test-stdout.txt': 'calling the judge with sk-live-123456 failed\n', 'core.bin': Buffer.from([1, 0, 2, 0]) });
    fs.symlinkSync(path.join(secretFile, 'host-secret.txt'), path.join(d, 'leak.txt'));
    fs.symlinkSync(secretFile, path.join(d, 'leakdir'));
    const files = await verifierFiles(d, ['sk-live-123456']);
    expect(Object.keys(files)).toEqual(['test-stdout.txt']);
    expect(files['test-stdout.txt']).not.toMatch(/sk-live-123456/);
    expect(JSON.stringify(files)).not.toMatch(/HOST FILE CONTENTS/);
  });

  it('bounds what it keeps: six files at most, 8 KiB in all', async () => {
    const many = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`f${i}.log`, `${'y'.repeat(3000)}\n`]));
    const files = await verifierFiles(folder(many), []);
    expect(Object.keys(files).length).toBeLessThanOrEqual(6);
    expect(Object.values(files).join('').length).toBeLessThanOrEqual(8192 + 6);
  });
});
