import chalk from 'chalk';
import type { RolloutSummary } from '../../../rollout/config.js';
import { firstPromptNotes } from '../../../rollout/first-prompts.js';
import { MASK_KIND_TEXT, MASKED_SHARE_WARNING, type MaskKind } from '../../../rollout/sample-mask.js';
import { displayDb } from '../../../store/postgres/url.js';
import { defaultDbPath } from '../../../store/store.js';
import { invokedAs, table } from '../../output.js';
import { count } from '../../plural.js';

// A rollout's summary as every path prints it (a local run, `--queue --wait`, `rollout show`), and its exit status.

/**
 * The exit status when every sample ended `error`. Not 1, which says the rollout did not finish and
 * `--resume` continues it: this one finished, so a resume refuses it, and its samples hold no reward
 * to learn from (an evaluator that crashes or times out, an upstream that never answers). A script
 * tells the two apart by the code; the cause is in `rollout show`'s error column.
 */
export const EXIT_ALL_ERRORED = 3;

/** Every sample of the rollout ended `error` (none completed, failed, timed out or is left to run). */
function allErrored(s: RolloutSummary): boolean {
  const o = s.outcomes;
  return o.error > 0 && o.error === o.completed + o.failed + o.timeout + o.error + o.interrupted + o.unfinished;
}

/** 0: completed with at least one sample that did not error; 1: not completed (resume it); 3: every sample errored. */
export function rolloutExitCode(s: RolloutSummary): number {
  if (s.status !== 'completed') return 1;
  return allErrored(s) ? EXIT_ALL_ERRORED : 0;
}

export function jsonSummary(s: RolloutSummary): Record<string, unknown> {
  return {
    ok: rolloutExitCode(s) === 0,
    ...s,
    ...(allErrored(s)
      ? { problem: `every sample ended error: no reward to learn from (exit ${EXIT_ALL_ERRORED}); see \`polar rollout show ${s.rolloutId}\`` }
      : {}),
  };
}

export function summaryText(s: RolloutSummary, dbPath: string): string {
  const o = s.outcomes;
  const db = dbPath === defaultDbPath() ? '' : ` --db ${displayDb(dbPath)}`;
  const lines = [
    `${chalk.bold('rollout')} ${s.rolloutId} ${s.status === 'completed' ? chalk.green(s.status) : chalk.yellow(s.status)}: ${s.harness}, ${count(s.tasks, 'task')} × ${count(s.samplesPerTask, 'sample')}`,
    `  outcomes: ${o.completed} completed, ${o.failed} failed, ${o.timeout} timeout, ${o.error} error${o.interrupted + o.unfinished > 0 ? `, ${o.interrupted + o.unfinished} not finished` : ''}${s.forfeited > 0 ? `; ${s.forfeited} scored 0 with a forfeit: their verifier was cut short or left no reward it could use, or the agent hit its own cap or left work polar would not collect (see rollout show)` : ''}`,
    `  mean reward ${fmt(s.meanReward)} · accepted ${s.accepted}/${s.attempted} · ${throughput(s)}`,
    ...(allErrored(s)
      ? [
          chalk.red(
            `  every sample ended error: no reward to learn from (exit ${EXIT_ALL_ERRORED}); the causes are in the error column of ${invokedAs()} rollout show ${s.rolloutId}${db}`,
          ),
        ]
      : []),
    ...(s.hostNetwork.length > 0
      ? [
          chalk.yellow(
            `  host network: ${s.hostNetwork.length === s.tasks * s.samplesPerTask ? 'every sample' : `${s.hostNetwork.length} sample(s)`} had this machine's network, not only the proxy`,
          ),
        ]
      : []),
    ...(s.refusedCalls ? [chalk.yellow(`  ${s.refusedCalls} call(s) refused without their session's key: ${invokedAs()} audit${db}`)] : []),
    ...firstPromptLines(s),
    ...maskedLines(s),
    '',
    groupTable(s),
    '',
    s.status === 'completed'
      ? `next: ${invokedAs()} rollout show ${s.rolloutId}${db}   ${invokedAs()} export --rollout ${s.rolloutId}${db} --out traces.jsonl`
      : `resume: ${invokedAs()} rollout --resume ${s.rolloutId}${db}`,
  ];
  return lines.join('\n');
}

/** The rate of this run; after a resume, the samples that ended before it are said apart (they took none of its time). */
function throughput(s: RolloutSummary): string {
  const o = s.outcomes;
  const before = o.completed + o.failed + o.timeout + o.error - s.endedHere;
  const rate = `${s.sessionsPerMinute.toFixed(1)} sessions/min · ${(s.durationMs / 1000).toFixed(0)} s`;
  return before > 0 ? `${rate} (${s.endedHere} ended in this run; ${before} before it)` : rate;
}

/**
 * Said loudly: a group whose samples do not share one first prompt is several NeMo-RL groups, each
 * sample alone getting advantage 0 (first-prompts.ts). With --json, `firstPromptSplits` and each
 * group's `firstPrompt` carry it.
 */
function firstPromptLines(s: RolloutSummary): string[] {
  const notes = firstPromptNotes(s.groups);
  return [...notes.splits.map((line) => chalk.red.bold(`  FIRST PROMPT SPLIT: ${line}`)), ...(notes.unchecked ? [chalk.yellow(`  ${notes.unchecked}`)] : [])];
}

/**
 * Samples NeMo-RL would train nothing on, by why (sample-mask.ts). Loud when they are many: a
 * rollout whose samples split into several traces looks fine by its rewards and trains nothing.
 */
export function maskedLines(s: RolloutSummary): string[] {
  const m = s.masked;
  if (!m || m.samples === 0) return [];
  const kinds = (Object.entries(m.byKind) as [MaskKind, number][]).sort((a, b) => b[1] - a[1]).map(([kind, n]) => `${n} ${MASK_KIND_TEXT[kind]}`);
  const head = `${m.samples} of ${m.of} ended samples train nothing (masked in polar gym-agent, left out of export --format nemo-gym): ${kinds.join('; ')}`;
  const loud = m.byKind.split !== undefined || m.samples > MASKED_SHARE_WARNING * m.of;
  const example = m.examples[0];
  return [
    loud ? chalk.red.bold(`  MASKED: ${head}`) : chalk.yellow(`  masked: ${head}`),
    ...(example ? [chalk.gray(`    e.g. ${example.sampleId} (${example.taskId}): ${example.reasons.slice(0, 300)}`)] : []),
  ];
}

function groupTable(s: RolloutSummary): string {
  return table(
    ['TASK', 'REWARDS', 'MEAN', 'STD', 'ADVANTAGES'],
    s.groups.map((g) => [g.taskId, g.rewards.map((r) => fmt(r)).join(' '), fmt(g.mean), fmt(g.std), g.advantages.map((a) => fmt(a, 2)).join(' ')]),
  );
}

export function fmt(n: number | null, digits = 3): string {
  if (n === null) return '-';
  if (Number.isInteger(n)) return String(n);
  // A float's rounding noise (an advantage of -1e-17) would print as "-0.00".
  const text = n.toFixed(digits);
  return /^-0\.?0*$/.test(text) ? text.slice(1) : text;
}
