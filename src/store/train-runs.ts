import fs from 'node:fs';
import { Store } from './store.js';

/** One sample the Gym agent ended during a `polar train grpo` run, as its live view shows it. */
export interface TrainSession {
  sessionId: string;
  taskId: string;
  reward: number | null;
  status: string;
}

/**
 * The agent's latest ended sessions since the run started (the agent records into this SQLite
 * database, which `train grpo` reads while NeMo-RL runs): newest first, at most `limit`. A database
 * not there yet, or one the agent is still creating, reads as none, so the view keeps drawing.
 */
export function recentSessions(dbPath: string, since: number, limit = 6): TrainSession[] {
  if (!fs.existsSync(dbPath)) return [];
  let store: Store | undefined;
  try {
    store = Store.open(dbPath, { readonly: true });
    const rows = store.db
      .prepare(`SELECT session_id, task_id, reward, status FROM samples WHERE ended_at >= ? AND session_id IS NOT NULL ORDER BY ended_at DESC LIMIT ?`)
      .all(since, limit) as { session_id: string; task_id: string; reward: number | null; status: string }[];
    return rows.map((r) => ({ sessionId: r.session_id, taskId: r.task_id, reward: r.reward, status: r.status }));
  } catch {
    return [];
  } finally {
    store?.close();
  }
}
