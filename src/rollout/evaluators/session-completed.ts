import type { Evaluator } from './types.js';

/** 1 if the harness ended on its own with exit 0: nothing runs after the agent. */
export const sessionCompleted: Evaluator<'session-completed'> = {
  type: 'session-completed',
  async evaluate(input, spec) {
    return { reward: input.sessionStatus === 'completed' ? 1 : 0, traceRewards: null, record: { type: spec.type, session_status: input.sessionStatus } };
  },
};
