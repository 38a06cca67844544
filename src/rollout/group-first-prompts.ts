import type { SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import { compareFirstPrompts, type FirstPromptCheck, sampleFirstPrompt } from './first-prompts.js';

/**
 * A group's first-prompt check from the store: each sample's first prompt as recorded (the main
 * agent's first call with server token ids, first-prompts.ts), compared across the group. A sample
 * that never reached a model call (an error before the harness ran, an unfinished one) is reported
 * as not compared, with why.
 */
export function groupFirstPrompts(store: Store, members: readonly SampleRow[]): FirstPromptCheck {
  return compareFirstPrompts(
    members.map((m) => (m.sessionId ? sampleFirstPrompt(store.requests.tokens(m.sessionId)) : { unchecked: `no session (${m.status})` })),
  );
}
