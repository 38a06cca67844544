import chalk from 'chalk';
import type { RolloutSummary } from '../../../rollout/config.js';
import { summarize } from '../../../rollout/run-rollout.js';
import { isBuiltinAgent } from '../../../rollout/agents/builtin.js';
import { compactionNotice } from '../../../rollout/sample-mask.js';
import { getHarness } from '../../../harness/registry.js';
import { openStore } from '../../../store/open.js';
import { redactUrl } from '../../../store/postgres/url.js';
import { invokedAs, printJson } from '../../output.js';
import { count } from '../../plural.js';
import { RolloutProgress } from '../../rollout-progress.js';
import { queuedArgs, type RolloutOptions } from './flags.js';
import { jsonSummary, rolloutExitCode, summaryText } from './summary.js';

/** `--queue`: the rollout goes to the shared store and its samples onto the queue, for workers anywhere. */
export async function queueRollout(opts: RolloutOptions): Promise<void> {
  const { url, ...base } = queuedArgs(opts);
  // Said here, where the rollout is made: the workers that run its samples serve many rollouts.
  const compaction = isBuiltinAgent(base.config.harness)
    ? null
    : compactionNotice(getHarness(base.config.harness, base.config.command ? { command: base.config.command } : {}), base.config.compaction);
  if (compaction) process.stderr.write(`${chalk.yellow('note')}: ${compaction}\n`);
  const [{ Postgres }, { enqueueRollout }] = await Promise.all([import('../../../store/postgres/client.js'), import('../../../rollout/queue/enqueue.js')]);
  const pg = new Postgres(url);
  const started = Date.now();
  let rolloutId: string;
  try {
    rolloutId = await enqueueRollout(pg, url, base.tasks, base.tasksFile, base.config, { retries: opts.retries, heartbeatSec: opts.heartbeat });
  } finally {
    await pg.close();
  }
  const total = base.tasks.length * base.config.samples;
  if (!opts.wait) {
    if (opts.json) printJson({ ok: true, rolloutId, queued: total, db: redactUrl(url) });
    else {
      process.stdout.write(
        `${chalk.bold('queued')} rollout ${rolloutId}: ${count(base.tasks.length, 'task')} × ${count(base.config.samples, 'sample')} for ${base.config.harness} workers\n`,
      );
      process.stdout.write(
        `next: ${invokedAs()} worker --queue ${redactUrl(url)} --harness ${base.config.harness} --upstream URL   (on each machine)\n      ${invokedAs()} rollout status ${rolloutId} --db ${redactUrl(url)}\n`,
      );
    }
    return;
  }
  const summary = await waitForRollout(url, rolloutId, base.config.harness, total, started, opts.json === true);
  if (opts.json) printJson(jsonSummary(summary));
  else process.stdout.write(`${summaryText(summary, url)}\n`);
  process.exitCode = rolloutExitCode(summary);
}

/**
 * Polls the shared store until every sample has ended (or was given up on), with a progress bar on
 * a terminal: one connection pool for the whole wait and one light query a second (each sample's
 * status); the store itself (its local mirror) is opened once, at the end, for the summary. A
 * PostgreSQL restart or failover is waited out (whileUnreachable: a line on stderr when the wait
 * starts and ends, up to POLAR_PG_RETRY_S), as the workers wait it out: the rollout goes on.
 */
async function waitForRollout(url: string, rolloutId: string, harness: string, total: number, started: number, json: boolean): Promise<RolloutSummary> {
  const [{ Postgres, whileUnreachable }, { interruptAbandoned }, { sampleHasEnded, sampleProgress }] = await Promise.all([
    import('../../../store/postgres/client.js'),
    import('../../../rollout/queue/enqueue.js'),
    import('../../../store/postgres/queue.js'),
  ]);
  const pg = new Postgres(url, { max: 1, applicationName: 'polar-wait' });
  const progress = !json && process.stderr.isTTY ? new RolloutProgress(total, 0) : null;
  const reported = new Set<string>();
  try {
    for (;;) {
      await interruptAbandoned(pg, rolloutId, harness).catch(() => 0);
      const samples = await whileUnreachable(() => sampleProgress(pg, rolloutId));
      // A sample interrupted by a worker's Ctrl-C or lost lease runs again: only one given up on has ended.
      const ended = samples.filter(sampleHasEnded);
      for (const s of ended) {
        if (reported.has(s.id)) continue;
        reported.add(s.id);
        if (progress) progress.event({ type: 'done', sampleId: s.id, taskId: s.taskId, outcome: s.status as 'completed', reward: s.reward, error: s.error });
        else if (!json)
          process.stderr.write(`  ${s.id} ${s.status}${s.reward !== null ? ` reward ${s.reward}` : ''}${s.worker ? chalk.dim(` on ${s.worker}`) : ''}\n`);
      }
      if (ended.length === samples.length) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
  } finally {
    progress?.stop();
    await pg.close();
  }
  // This rollout's rows only (postgres/scoped.ts), not the whole store's.
  const store = await whileUnreachable(() => openStore(url, { readonly: true, scope: { rollouts: [rolloutId] } }));
  try {
    return { ...summarize(store, rolloutId, redactUrl(url), Date.now() - started), db: redactUrl(url) };
  } finally {
    store.close();
  }
}
