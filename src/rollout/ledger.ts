import type { ACTIVE_STAGES, SampleEnd, SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';
import { groupStats } from './stats.js';

/**
 * Where a rollout's samples move through their stages and end, once. A local rollout keeps them in
 * its own database (this file); workers of a queued rollout keep them in the shared PostgreSQL store,
 * where other machines' workers see them (queue/pg-ledger.ts). Either way a sample's outcome and
 * reward are set once, and a group's statistics when its last sample ends.
 */
export interface SampleLedger {
  /** A new attempt under `sessionId`: its number, or null if the sample already ended. */
  start(sample: SampleRow, sessionId: string): Promise<number | null>;
  stage(sampleId: string, status: (typeof ACTIVE_STAGES)[number], timing?: Record<string, number>): Promise<void>;
  /** Ends the sample; false (nothing written) if it had ended already, or this attempt was superseded. */
  finish(sampleId: string, end: SampleEnd): Promise<boolean>;
  /** Stopped before it ended (Ctrl-C): left for a resume or a retry. */
  interrupt(sampleId: string): Promise<void>;
}

export function localLedger(store: Store): SampleLedger {
  return {
    start: async (sample, sessionId) => store.rollouts.start(sample.id, sessionId),
    stage: async (id, status, timing) => store.rollouts.stage(id, status, timing),
    finish: async (id, end) => store.rollouts.finish(id, end, groupStats),
    interrupt: async (id) => store.rollouts.interrupt(id),
  };
}
