import type { TaskEvaluator } from '../task-file.js';
import { commandEvaluator } from './command.js';
import { harborEvaluator } from './harbor.js';
import { sessionCompleted } from './session-completed.js';
import { testsEvaluator } from './tests.js';
import type { Evaluation, EvaluationInput, Evaluator } from './types.js';

/** Every evaluator by its task-file `type`, as providers/codecs.ts picks a codec: a new kind is one file and one line. */
const EVALUATORS: { [T in TaskEvaluator['type']]: Evaluator<T> } = {
  'session-completed': sessionCompleted,
  command: commandEvaluator,
  tests: testsEvaluator,
  harbor: harborEvaluator,
};

export function evaluatorFor<T extends TaskEvaluator['type']>(type: T): Evaluator<T> {
  return EVALUATORS[type];
}

/** Scores a finished session with its task's evaluator. */
export function evaluate(input: EvaluationInput): Promise<Evaluation> {
  const spec = input.task.evaluator;
  return (evaluatorFor(spec.type) as Evaluator).evaluate(input, spec as never);
}
