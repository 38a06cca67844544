import type { RunnerName } from '../../task-file.js';
/** What a runner's report says of one test. A test the report does not name did not run. */
export type TestOutcome = 'passed' | 'failed' | 'skipped';

/**
 * One test runner polar drives itself, as SWE-bench grades a patch: it runs the named tests with a
 * configuration that comes from polar and the task, never from the workspace, and writes a
 * machine-readable report into `$POLAR_REPORT_DIR` (a folder made empty for the run, read after
 * every process of it is dead). The grade is what that report says of each named test; the
 * runner's exit status counts for nothing.
 */
export interface TestRunner {
  readonly name: RunnerName;
  /** The shell command that runs `ids` (with the task's extra `args`) in the workspace. */
  command(ids: readonly string[], args: readonly string[]): string;
  /** The report's outcome for every test it ran, by the runner's own test id. Throws when there is none. */
  read(reportDir: string): Promise<Map<string, TestOutcome>>;
  /** Whether `test` (a report id) is one of the tests the task's `id` names (a module, class or file names all of its tests). */
  covers(id: string, test: string): boolean;
  /** Workspace files the runner would read as code or configuration besides the tests: reset to the task's version like its test files. */
  readonly configFiles: readonly string[];
}
