import { describe, expect, it } from 'vitest';
import { DEFAULT_TEST_FILES, isTestFile, withoutTestFiles } from './test-files.js';

const part = (a: string, b = a, body = '@@ -1 +1 @@\n-x\n+y\n') => `diff --git a/${a} b/${b}\nindex 1..2 100644\n--- a/${a}\n+++ b/${b}\n${body}`;

describe('test files a tests evaluator resets', () => {
  it('knows the usual places tests live, and only those', () => {
    for (const f of [
      'test.js',
      'tests/test_x.py',
      'pkg/tests/helpers.py',
      'src/a.test.ts',
      'x_test.go',
      'test_fizzbuzz.py',
      'conftest.py',
      'sub/conftest.py',
      '__tests__/a.js',
    ])
      expect(isTestFile(f, DEFAULT_TEST_FILES), f).toBe(true);
    for (const f of ['sum.js', 'stats.py', 'src/contest.py', 'latest.js', 'attestation/a.py']) expect(isTestFile(f, DEFAULT_TEST_FILES), f).toBe(false);
  });

  it('takes a task’s own paths: a folder covers what is under it, a glob matches within names', () => {
    expect(isTestFile('checks/a/b.js', ['checks'])).toBe(true);
    expect(isTestFile('checks.js', ['checks'])).toBe(false);
    expect(isTestFile('spec_x.rb', ['spec_*.rb'])).toBe(true);
    expect(isTestFile('test.js', [])).toBe(false);
  });

  it('drops the parts of a patch that touch test files, renames and new files included', () => {
    const diff = [
      part('sum.js'),
      part('test.js', 'test.js', '@@ -1 +1 @@\n-assert()\n+process.exit(0)\n'),
      'diff --git a/conftest.py b/conftest.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+import os\n',
      'diff --git a/lib.js b/tests/lib.js\nsimilarity index 100%\nrename from lib.js\nrename to tests/lib.js\n',
      'diff --git "a/we ird.js" "b/we ird.js"\nindex 1..2 100644\n--- "a/we ird.js"\n+++ "b/we ird.js"\n@@ -1 +1 @@\n-a\n+b\n',
    ].join('');
    const { kept, reset } = withoutTestFiles(diff, DEFAULT_TEST_FILES);
    expect(reset.sort()).toEqual(['conftest.py', 'lib.js', 'test.js', 'tests/lib.js']);
    expect(kept).toContain('diff --git a/sum.js b/sum.js');
    expect(kept).toContain('we ird.js');
    expect(kept).not.toContain('process.exit(0)');
    expect(kept).not.toContain('conftest.py');
  });

  it('keeps an empty patch empty', () => {
    expect(withoutTestFiles('', DEFAULT_TEST_FILES)).toEqual({ kept: '', reset: [] });
  });
});
