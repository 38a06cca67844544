import type { Store } from '../store/store.js';
import { replaySplit } from '../trajectory/export/select.js';
import { count } from './plural.js';

/** `--include-replays`, the same words in `export`, `reconstruct` and `verify-faithfulness`. */
export const INCLUDE_REPLAYS_HELP = 'also sessions recorded by `polar replay` (a recording played back, not sampled)';

/**
 * The sessions a command reads, without those `polar replay` recorded unless asked for: a replay's
 * tokens were played back from a recording by a cassette, not sampled by a model, so they are no
 * training data and no evidence about a model's sampling (the export leaves them out the same way,
 * export/select.ts). `sessions`: the ones asked for (undefined: all); returned unchanged when no
 * replay is among them, so "all" stays all.
 */
export function withoutReplays(
  store: Store,
  sessions: readonly string[] | undefined,
  includeReplays: boolean,
): { sessions: readonly string[] | undefined; replays: number } {
  if (includeReplays) return { sessions, replays: 0 };
  const { kept, replays } = replaySplit(store, sessions, false);
  return { sessions: replays.length > 0 ? kept : sessions, replays: replays.length };
}

/** The line that says how many were left out, and how to keep them. */
export function replaysLeftOut(replays: number): string {
  return `left out ${count(replays, 'session')} recorded by polar replay (played back, not sampled; --include-replays keeps ${replays === 1 ? 'it' : 'them'})`;
}
