import chalk from 'chalk';
import type { AgentRun, TaskCheck } from '../../rollout/checking/check.js';
import type { InvalidHarborTask } from '../../rollout/harbor/load.js';
import { verifierFilesLines } from '../../rollout/evaluators/verifier-files.js';
import { NO_SOLUTION } from '../../rollout/checking/verdict.js';

/** A task that did not load, as a `polar tasks check` result: its reasons are its problems. */
export interface InvalidCheck {
  task: string;
  name: string;
  verdict: 'invalid';
  ok: false;
  problems: string[];
  unverifiable: string[];
  unsupported: string[];
  oracle: null;
  nop: null;
  hackable: string[];
  escapes: string[];
  forgeries: Record<string, never>;
}

export type CheckResult = TaskCheck | InvalidCheck;

export function invalidChecks(invalid: readonly InvalidHarborTask[]): InvalidCheck[] {
  return invalid.map((t) => ({
    task: t.id,
    name: t.id,
    verdict: 'invalid',
    ok: false,
    problems: t.problems,
    unverifiable: [],
    unsupported: [],
    oracle: null,
    nop: null,
    hackable: [],
    escapes: [],
    forgeries: {},
  }));
}

/** The tasks by verdict, in the order they were read. */
export function byVerdict(results: readonly CheckResult[]): Record<CheckResult['verdict'], string[]> {
  const of = (v: CheckResult['verdict']) => results.filter((r) => r.verdict === v).map((r) => r.task);
  return { valid: of('valid'), broken: of('broken'), unverifiable: of('unverifiable'), unsupported: of('unsupported'), invalid: of('invalid') };
}

/**
 * `polar tasks check`'s exit status: 1 when a task is broken; with --strict also when one is
 * unverifiable here, unsupported or invalid (a suite that must run whole, here); else 0.
 */
export function checkExitCode(results: readonly CheckResult[], strict: boolean): 0 | 1 {
  const v = byVerdict(results);
  if (v.broken.length > 0) return 1;
  return strict && v.unverifiable.length + v.unsupported.length + v.invalid.length > 0 ? 1 : 0;
}

const LABEL: Record<CheckResult['verdict'], string> = {
  valid: chalk.green('valid       '),
  broken: chalk.red('BROKEN      '),
  unverifiable: chalk.yellow('unverifiable'),
  unsupported: chalk.yellow('unsupported '),
  invalid: chalk.magenta('invalid     '),
};
const INDENT = ' '.repeat(13);

/** The text report: one line per task with its verdict, its reasons under it, the verifier's own words where they explain it. */
export function checkReport(results: readonly CheckResult[], forge: boolean, strict: boolean): string {
  const lines: string[] = [];
  for (const r of results) {
    if (r.verdict === 'invalid') {
      lines.push(`${LABEL.invalid} ${r.name}  does not load, skipped`);
      for (const p of r.problems) lines.push(`${INDENT}${p}`);
      continue;
    }
    const tried = Object.keys(r.forgeries).length;
    const forged =
      !forge || tried === 0
        ? ''
        : r.hackable.length + r.escapes.length > 0
          ? [
              r.hackable.length > 0 ? `, hackable: ${r.hackable.join(', ')}` : '',
              r.escapes.length > 0 ? `, escapes its group: ${r.escapes.join(', ')}` : '',
            ].join('')
          : `, ${tried} forger${tried === 1 ? 'y' : 'ies'} tried, none won`;
    lines.push(`${LABEL[r.verdict]} ${r.name}  oracle ${rewards(r.oracle)}, nop ${rewards(r.nop)}${forged}`);
    for (const p of r.problems) lines.push(`${INDENT}${p}`);
    for (const u of r.unsupported) lines.push(`${INDENT}${chalk.yellow(`not supported by polar yet: ${u}`)}`);
    for (const u of r.unverifiable) lines.push(`${INDENT}${chalk.yellow(u)}`);
    if (r.problems.some((p) => !p.startsWith('hackable: ') && !p.startsWith('escapes its group: ')) || r.unverifiable.length > 0)
      lines.push(...evidence(r).map((l) => chalk.dim(`${INDENT}${l}`)));
  }
  lines.push('', ...summary(results, forge, strict));
  return lines.join('\n');
}

function rewards(run: AgentRun): string {
  if (run.outcome === NO_SOLUTION) return 'not run (no "solution")';
  return run.reward === null ? run.outcome : `${run.reward}${run.rewards && Object.keys(run.rewards).length > 1 ? ` ${JSON.stringify(run.rewards)}` : ''}`;
}

/** The verifier's output and its files' tails, from the run that tells (the oracle's when it missed, else nop's). */
function evidence(r: TaskCheck): string[] {
  const oracleSpeaks =
    r.oracle.errorStage !== 'init' &&
    (r.oracle.reward === null || r.problems.concat(r.unverifiable).some((x) => x.includes('oracle') || x.includes('verifier')));
  const run = oracleSpeaks ? r.oracle : r.nop;
  if (run.errorStage === 'init') return [];
  const out = run.output?.trim();
  return [
    ...(out
      ? out
          .split('\n')
          .slice(-10)
          .map((l) => `| ${l}`)
      : []),
    ...verifierFilesLines(run.verifierFiles),
  ];
}

function summary(results: readonly CheckResult[], forge: boolean, strict: boolean): string[] {
  const v = byVerdict(results);
  const n = results.length;
  const hackable = results.filter((r) => r.hackable.length > 0).length;
  const escapes = results.filter((r) => r.escapes.length > 0).length;
  const lines: string[] = [];
  if (v.valid.length === n)
    lines.push(
      chalk.green(`all ${n} tasks are sound: every oracle reaches its top reward, no nop earns any${forge ? ' and no forgery beats a verifier' : ''}`),
    );
  else {
    const parts = [
      `${v.valid.length} valid`,
      `${v.broken.length} broken${hackable + escapes > 0 ? ` (${[hackable > 0 ? `${hackable} hackable` : '', escapes > 0 ? `${escapes} escape their group` : ''].filter(Boolean).join(', ')})` : ''}`,
      `${v.unverifiable.length} unverifiable here`,
      ...(v.unsupported.length > 0 ? [`${v.unsupported.length} unsupported by polar yet`] : []),
      `${v.invalid.length} invalid`,
    ];
    lines.push((v.broken.length > 0 ? chalk.red : chalk.yellow)(`${n} tasks: ${parts.join(', ')}`));
    if (v.broken.length > 0) lines.push(chalk.red(`${v.broken.length} of ${n} tasks are broken: ${v.broken.join(', ')}`));
    const unsure = v.unverifiable.length + v.unsupported.length + v.invalid.length;
    if (unsure > 0)
      lines.push(
        chalk.yellow(
          strict
            ? `--strict: ${unsure} task${unsure === 1 ? '' : 's'} not checked (unverifiable here, unsupported or invalid) make the exit status 1`
            : `${unsure} task${unsure === 1 ? '' : 's'} could not be checked (unverifiable here, unsupported or invalid): not counted as broken; --strict makes them fail the check`,
        ),
      );
  }
  if (!forge) lines.push(chalk.yellow('forgeries not tried (--no-forge): whether a verifier can be gamed was not checked'));
  return lines;
}
