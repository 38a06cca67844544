import { summarize } from '../../../rollout/run-rollout.js';
import { openStore } from '../../../store/open.js';
import { defaultDbPath } from '../../../store/store.js';
import { formatTime, printJson, table } from '../../output.js';
import { fmt } from './summary.js';

// `polar rollouts`: every rollout in the store, a line each.

export async function listRollouts(opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  const store = await openStore(dbPath, { readonly: true });
  try {
    const rows = store.rollouts.list().map((r) => summarize(store, r.id, dbPath, (r.endedAt ?? Date.now()) - r.createdAt, undefined, { firstPrompts: false }));
    if (opts.json) {
      printJson({ ok: true, rollouts: rows.map(({ groups: _g, ...rest }) => rest) });
      return;
    }
    if (rows.length === 0) {
      process.stdout.write('no rollouts yet: start one with `polar rollout --tasks FILE --harness NAME --upstream URL --samples N`\n');
      return;
    }
    const created = new Map(store.rollouts.list().map((r) => [r.id, r.createdAt]));
    process.stdout.write(
      `${table(
        ['ROLLOUT', 'STATUS', 'HARNESS', 'TASKS', 'SAMPLES', 'DONE', 'MEAN REWARD', 'ACCEPTED', 'CREATED'],
        rows.map((r) => [
          r.rolloutId,
          r.status,
          r.harness,
          r.tasks,
          r.tasks * r.samplesPerTask,
          r.outcomes.completed + r.outcomes.failed + r.outcomes.timeout + r.outcomes.error,
          fmt(r.meanReward),
          `${r.accepted}/${r.attempted}`,
          formatTime(created.get(r.rolloutId) ?? null),
        ]),
      )}\n`,
    );
  } finally {
    store.close();
  }
}
