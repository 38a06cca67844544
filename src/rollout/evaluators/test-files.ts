import { matchesGlob } from '../../core/glob.js';
/**
 * The test files a `tests` evaluator resets to the task's version before it runs them, as
 * SWE-bench resets the files its task names: an agent told "do not change test.js" that rewrites it
 * to `process.exit(0)` would otherwise grade itself. The task names them in `evaluator.test_files`
 * (paths or globs, relative to the workspace; a folder covers everything under it); without that,
 * the usual places tests live.
 */
export const DEFAULT_TEST_FILES = [
  'test/**',
  'tests/**',
  '__tests__/**',
  'spec/**',
  '**/test/**',
  '**/tests/**',
  '**/__tests__/**',
  '**/test.*',
  '**/test_*',
  '**/*_test.*',
  '**/*.test.*',
  '**/*.spec.*',
  '**/conftest.py',
  '**/pytest.ini',
  '**/tox.ini',
  '**/jest.config.*',
  '**/vitest.config.*',
];

/** Whether `file` (workspace-relative, `/`-separated) is one of the task's test files. */
export function isTestFile(file: string, patterns: readonly string[]): boolean {
  return matchesGlob(file, patterns);
}

/**
 * Splits a `git diff --binary` patch by file and drops the parts touching test files (by either
 * name, so a rename into or out of tests/ goes too). Returns what is kept and which paths were reset.
 */
export function withoutTestFiles(diff: string, patterns: readonly string[]): { kept: string; reset: string[] } {
  if (diff.trim() === '') return { kept: diff, reset: [] };
  const parts = diff.split(/(?=^diff --git )/m);
  const kept: string[] = [];
  const reset: string[] = [];
  for (const part of parts) {
    const paths = diffPaths(part);
    if (paths.length > 0 && paths.some((f) => isTestFile(f, patterns))) reset.push(...new Set(paths));
    else kept.push(part);
  }
  return { kept: kept.join(''), reset: [...new Set(reset)] };
}

/** The paths one file's part of a patch names (its header, ---/+++ and rename lines). */
function diffPaths(part: string): string[] {
  const out: string[] = [];
  const header = /^diff --git (.+)$/m.exec(part);
  if (header) out.push(...headerPaths(header[1]!));
  for (const m of part.matchAll(/^(?:---|\+\+\+) (.+)$/gm)) {
    const p = unquote(m[1]!);
    if (p !== '/dev/null') out.push(p.replace(/^[ab]\//, ''));
  }
  for (const m of part.matchAll(/^rename (?:from|to) (.+)$/gm)) out.push(unquote(m[1]!));
  return out;
}

/** `a/x b/x`, or either side C-quoted when its path has unusual bytes: `"a/x y" "b/x y"`. */
function headerPaths(rest: string): string[] {
  const tokens = rest.match(/"(?:[^"\\]|\\.)*"|\S+(?: \S+)*?(?= [ab"]\/| "|$)/g) ?? [];
  return tokens.map((t) => unquote(t).replace(/^[ab]\//, ''));
}

/** git quotes a path with unusual bytes as a C string: "a/te\"st". */
function unquote(p: string): string {
  const t = p.trim();
  if (!t.startsWith('"')) return t;
  try {
    return JSON.parse(t) as string;
  } catch {
    return t.slice(1, -1);
  }
}
