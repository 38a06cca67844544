import type { Store } from '../../store/store.js';
import type { ResponseLookup } from '../conversation.js';
import { reconstruct, type ReconstructStats } from '../reconstruct.js';
import type { Strategy } from '../types.js';
import { nemoGymResult } from './nemo-gym.js';
import { sftExample } from './sft.js';

export type ExportFormat = 'tokens' | 'sft' | 'nemo-gym';

export interface ExportSelection {
  format: ExportFormat;
  strategy: Strategy;
  /** Undefined: every session. */
  sessions?: readonly string[];
  minReward: number | null;
  /** Only samples a rollout accepted. */
  accepted: boolean;
  /** Also traces of sessions that did not end on their own. */
  includePartial: boolean;
  lookup?: ResponseLookup;
}

/**
 * The lines an export writes, trace by trace, each either a line in the chosen format or the reason
 * it was left out (partial, not accepted, below the reward floor, or a format's own problem). Shared
 * by `polar export` and `polar train sft --db`.
 */
export function* exportLines(store: Store, sel: ExportSelection, stats: ReconstructStats): Generator<{ line: unknown } | { leftOut: string }, void> {
  for (const trace of reconstruct(store, { strategy: sel.strategy, ...(sel.sessions ? { sessions: sel.sessions } : {}) }, stats)) {
    if (trace.partial && !sel.includePartial) {
      yield { leftOut: `partial: session ${trace.status} (--include-partial keeps it)` };
      continue;
    }
    if (sel.accepted && trace.accepted !== true) {
      yield { leftOut: trace.accepted === null ? 'not a rollout sample (--accepted)' : 'not accepted (--accepted)' };
      continue;
    }
    if (sel.minReward !== null && (trace.reward === null || trace.reward < sel.minReward)) {
      yield { leftOut: trace.reward === null ? 'no reward (--min-reward)' : `reward below ${sel.minReward} (--min-reward)` };
      continue;
    }
    const line =
      sel.format === 'sft'
        ? sftExample(store.requests.get(trace.request_ids[trace.request_ids.length - 1]!)!, sel.lookup)
        : sel.format === 'nemo-gym'
          ? nemoGymResult(trace, trace.request_ids.map((id) => store.requests.get(id)!), sel.lookup)
          : trace;
    if ('problem' in line) yield { leftOut: line.problem };
    else yield { line };
  }
}
