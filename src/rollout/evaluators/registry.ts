import type { TaskEvaluator } from '../task-file.js';
import { commandEvaluator } from './command.js';
import { harborEvaluator } from './harbor.js';
import { sessionCompleted } from './session-completed.js';
import { testsEvaluator } from './tests.js';
import type { Evaluation, EvaluationInput, Evaluator } from './types.js';
import { boundedEvaluation } from '../reward-range.js';

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

/**
 * Scores a finished session with its task's evaluator. The one place every evaluator's reward
 * passes (a multi-step sample's steps each too; step-stages.ts bounds their combination): a reward
 * that is not finite or outside the rollout's range forfeits here (reward-range.ts).
 */
export async function evaluate(input: EvaluationInput): Promise<Evaluation> {
  const spec = input.task.evaluator;
  return boundedEvaluation(await (evaluatorFor(spec.type) as Evaluator).evaluate(input, spec as never), input.rewardRange);
}
