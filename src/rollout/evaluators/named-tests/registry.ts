import { nodeTestRunner } from './node.js';
import { pytestRunner, unittestRunner } from './python.js';
import type { RunnerName } from '../../task-file.js';
import type { TestRunner } from './types.js';

/** Every runner polar drives, by the task file's `runner` name: a new one is one file and one line. */
const RUNNERS: Record<RunnerName, TestRunner> = {
  pytest: pytestRunner,
  unittest: unittestRunner,
  'node-test': nodeTestRunner,
};

export function runnerFor(name: RunnerName): TestRunner {
  return RUNNERS[name];
}
