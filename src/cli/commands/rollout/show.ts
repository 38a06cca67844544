import chalk from 'chalk';
import { PolarError } from '../../../core/errors.js';
import type { RolloutSummary } from '../../../rollout/config.js';
import { summarize } from '../../../rollout/run-rollout.js';
import { openStore } from '../../../store/open.js';
import { defaultDbPath } from '../../../store/store.js';
import { sampleLogTail } from '../../log-tail.js';
import { verifierFilesLines } from '../../../rollout/evaluators/verifier-files.js';
import { clip } from '../../clip.js';
import { printJson, table } from '../../output.js';
import { phasesJson, phasesText } from './phases.js';
import { fmt, summaryText } from './summary.js';

// `polar rollout show ID`: one rollout's groups, each sample's outcome, reward and advantages.

/** A group's first-prompt check in a few words, for `rollout show`'s group header. */
function firstPromptTag(g: RolloutSummary['groups'][number]): string {
  const c = g.firstPrompt;
  if (!c) return '';
  if (c.status === 'split') return chalk.red.bold(`FIRST PROMPT SPLIT: ${c.distinct} first prompts (by sample: ${c.prompt.map((p) => p ?? '-').join(' ')})`);
  if (c.status === 'same') return chalk.dim(`one first prompt (${c.checked} samples compared)`);
  return chalk.yellow(`first prompts not compared: ${c.unchecked[0]?.reason ?? 'fewer than two samples'}`);
}

export async function showRollout(id: string, opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  // Of a shared store, this rollout's rows only: its samples, their sessions and calls (postgres/scoped.ts).
  const store = await openStore(dbPath, { readonly: true, scope: { rollouts: [id] } });
  try {
    const row = store.rollouts.get(id);
    if (!row) throw new PolarError('POLAR_USAGE', `no rollout ${JSON.stringify(id)} in this database; list them with \`polar rollouts\``);
    const summary = summarize(store, id, dbPath, (row.endedAt ?? Date.now()) - row.createdAt);
    const samples = store.rollouts.samples(id);
    // A sample that failed with no error of its own: the cause is in its harness's log, if anywhere.
    const logs = new Map(samples.map((m) => [m.id, sampleLogTail(store, dbPath, m)]));
    if (opts.json) {
      printJson({
        ok: true,
        rollout: row,
        summary,
        samples: samples.map(({ diff: _diff, ...rest }) => {
          const log = logs.get(rest.id);
          // Each phase's time by name (phases.ts), beside the raw stage timings in `timing`.
          const withPhases = { ...rest, phases: phasesJson(rest.timing) };
          return log ? { ...withPhases, harnessLog: log } : withPhases;
        }),
      });
      return;
    }
    process.stdout.write(`${summaryText(summary, dbPath).split('\n').slice(0, 3).join('\n')}\n`);
    for (const g of summary.groups) {
      process.stdout.write(`\n${chalk.bold(g.taskId)}  group ${g.groupId}  mean ${fmt(g.mean)}  std ${fmt(g.std)}  ${firstPromptTag(g)}\n`);
      const members = samples.filter((m) => m.taskId === g.taskId);
      process.stdout.write(
        `${table(
          ['#', 'OUTCOME', 'REWARD', 'ADVANTAGE', 'LOO', 'ACCEPTED', 'ATTEMPT', 'SESSION', 'ERROR'],
          members.map((m) => [
            m.sampleIndex,
            m.status,
            fmt(m.reward),
            fmt(m.advantage),
            fmt(m.looAdvantage),
            m.accepted === null ? '-' : m.accepted ? 'yes' : 'no',
            m.attempt,
            m.sessionId ?? '-',
            m.error ? clip(`${m.errorStage}: ${m.error}`, ERROR_COLUMN) : (forfeitColumn(m.evaluator) ?? logColumn(logs.get(m.id) ?? null)),
          ]),
        )}\n`,
      );
      for (const m of members) {
        // An error the column cut, whole under the table: its cause, then what polar ran.
        if (m.error && clip(`${m.errorStage}: ${m.error}`, ERROR_COLUMN).endsWith('…'))
          process.stdout.write(`${chalk.dim(`  #${m.sampleIndex} ${m.errorStage}: ${m.error}`)}\n`);
        for (const line of verifierReasons(m.sampleIndex, m.evaluator)) process.stdout.write(`${line}\n`);
      }
      // Where each sample's time went, phase by phase (phases.ts): each phase has its own budget.
      for (const m of members) {
        const time = phasesText(m.timing);
        if (time) process.stdout.write(`${chalk.dim(`  #${m.sampleIndex} time: ${time}`)}\n`);
      }
    }
  } finally {
    store.close();
  }
}

/** The characters of a sample's error the table shows; a longer one follows the table whole. */
const ERROR_COLUMN = 100;

/** Why a sample scored 0 without a verdict (its verifier was killed, timed out, left no reward). */
function forfeitColumn(evaluator: Record<string, unknown> | null): string | null {
  const why = evaluator?.forfeit;
  return typeof why === 'string' ? `scored 0: ${why.slice(0, 80)}` : null;
}

/**
 * Under a sample that earned 0 or was forfeited: the tail of the files its Harbor verifier wrote
 * under /logs/verifier (test-stdout.txt, where test.sh's own output goes in Harbor) and the
 * network hint, where the evaluator recorded them (evaluators/harbor.ts).
 */
function verifierReasons(index: number, evaluator: Record<string, unknown> | null): string[] {
  const files = evaluator?.verifier_files;
  const hint = evaluator?.network_hint;
  const lines = verifierFilesLines(typeof files === 'object' && files !== null ? (files as Record<string, string>) : null, 5).map((l) =>
    chalk.dim(`  #${index} ${l}`),
  );
  if (typeof hint === 'string') lines.push(chalk.yellow(`  #${index} ${hint}`));
  return lines;
}

/** The error column from a harness log's last words, when the sample has no error of its own. */
function logColumn(log: { tail: string[] } | null): string {
  if (!log) return '';
  const text = log.tail.join(' · ');
  return `harness.log: ${text.length > 120 ? `${text.slice(0, 119)}…` : text}`;
}
