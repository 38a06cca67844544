import type { TestOutcome } from './types.js';

export type TestKind = 'fail_to_pass' | 'pass_to_pass';

/** One test the task names, as the report found it. */
export interface NamedTestResult {
  id: string;
  kind: TestKind;
  /** `not run`: the report names no test of it (the run ended first, it was not collected, the name is wrong). */
  outcome: TestOutcome | 'not run';
  /** How many of the report's tests it covers (a module, class or file covers several). */
  tests: number;
}

/**
 * Each named test's outcome from the report: passed only if the report covers at least one test of
 * it and every one of those passed. A test that did not run is not a pass (SWE-bench's rule), nor
 * is one that was skipped.
 */
export function gradeNamed<K extends TestKind | null>(
  covers: (id: string, test: string) => boolean,
  named: readonly { id: string; kind: K }[],
  report: ReadonlyMap<string, TestOutcome>,
): (Omit<NamedTestResult, 'kind'> & { kind: K })[] {
  return named.map(({ id, kind }) => {
    const covered = [...report].filter(([test]) => covers(id, test)).map(([, o]) => o);
    const outcome: NamedTestResult['outcome'] =
      covered.length === 0 ? 'not run' : covered.includes('failed') ? 'failed' : covered.includes('skipped') ? 'skipped' : 'passed';
    return { id, kind, outcome, tests: covered.length };
  });
}
