import chalk from 'chalk';
import { PolarError } from '../../../core/errors.js';
import { SAMPLE_OUTCOMES } from '../../../store/rollouts.js';
import { openStore } from '../../../store/open.js';
import { isPostgresUrl } from '../../../store/postgres/url.js';
import { defaultDbPath } from '../../../store/store.js';
import { printJson, table } from '../../output.js';
import { fmt } from './summary.js';

// `polar rollout status ID`: samples per stage and outcome, and per worker (a queued rollout's are on many machines).
// On a shared store it waits out a PostgreSQL restart (whileUnreachable), as the rollout it reports on does.

export async function rolloutStatus(id: string, opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  // Of a shared store, this rollout's rows only, without its calls (postgres/scoped.ts).
  const open = () => openStore(dbPath, { readonly: true, scope: { rollouts: [id], calls: false } });
  const store = isPostgresUrl(dbPath) ? await (await import('../../../store/postgres/client.js')).whileUnreachable(open) : await open();
  try {
    const row = store.rollouts.get(id);
    if (!row) throw new PolarError('POLAR_USAGE', `no rollout ${JSON.stringify(id)} in this database; list them with \`polar rollouts\``);
    const samples = store.rollouts.samples(id);
    const byStatus: Record<string, number> = {};
    const byWorker = new Map<string, { running: number; ended: number; rewardSum: number; rewarded: number }>();
    for (const s of samples) {
      byStatus[s.status] = (byStatus[s.status] ?? 0) + 1;
      if (!s.worker) continue;
      const w = byWorker.get(s.worker) ?? { running: 0, ended: 0, rewardSum: 0, rewarded: 0 };
      if ((SAMPLE_OUTCOMES as readonly string[]).includes(s.status)) w.ended++;
      else if (s.status !== 'queued' && s.status !== 'interrupted') w.running++;
      if (s.reward !== null) {
        w.rewardSum += s.reward;
        w.rewarded++;
      }
      byWorker.set(s.worker, w);
    }
    const ended = samples.filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status)).length;
    const workers = [...byWorker].map(([worker, w]) => ({
      worker,
      running: w.running,
      ended: w.ended,
      meanReward: w.rewarded ? w.rewardSum / w.rewarded : null,
    }));
    if (opts.json) {
      printJson({ ok: true, rolloutId: id, status: row.status, samples: samples.length, ended, byStatus, workers });
      return;
    }
    process.stdout.write(
      `${chalk.bold('rollout')} ${id} ${row.status}: ${ended}/${samples.length} samples ended · ${Object.entries(byStatus)
        .map(([k, n]) => `${n} ${k}`)
        .join(', ')}\n`,
    );
    if (workers.length > 0)
      process.stdout.write(
        `${table(
          ['WORKER', 'RUNNING', 'ENDED', 'MEAN REWARD'],
          workers.map((w) => [w.worker, w.running, w.ended, fmt(w.meanReward)]),
        )}\n`,
      );
  } finally {
    store.close();
  }
}
