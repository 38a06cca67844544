import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { checkTasks, type TaskCheck } from '../../rollout/harbor/check.js';
import { environmentNotice, type HarborEnvironment } from '../../rollout/harbor/environment.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { isHarborPath, readHarborTasks } from '../../rollout/harbor/load.js';
import { addSandboxOptions, limitsFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import { integerArg, secondsArg } from '../numbers.js';
import { action, printJson } from '../output.js';

interface CheckOptions extends SandboxFlags {
  json?: boolean;
  environment?: HarborEnvironment;
  concurrency: number;
  timeout: number;
  /** false with --no-forge. */
  forge: boolean;
}

export function registerTasks(program: Command): void {
  const tasks = program.command('tasks').description('Harbor task suites: validate them before spending GPU hours');
  const check = tasks
    .command('check')
    .description(
      'run every task with the oracle (solution/solve.sh), with nop (nothing) and with each known forgery that applies (forge:<name>): a task whose oracle misses its top reward, whose nop earns reward, or whose verifier pays a forgery more than nop (hackable) is broken',
    )
    .argument('<path>', 'a Harbor task folder or a folder of them')
    .addOption(environmentOption())
    .option('--concurrency <k>', 'tasks at once', integerArg('--concurrency', 1, 64), 2)
    .option('--timeout <seconds>', "a trial's budget when its task.toml gives no [agent].timeout_sec", secondsArg('--timeout'), 600)
    .option('--no-forge', 'skip the forgeries: only the oracle and nop (faster; says nothing about whether a verifier can be gamed)')
    .option('--json', 'print the result as JSON');
  addSandboxOptions(check, 'the oracle and verifier').action(action(tasksCheck));
}

async function tasksCheck(p: string, opts: CheckOptions): Promise<void> {
  if (!isHarborPath(p)) throw new PolarError('POLAR_USAGE', `${p} is not a folder: polar tasks check takes a Harbor task folder or a folder of them`);
  const tasks = readHarborTasks(p);
  const environment = harborEnvironment(opts.environment, true);
  const chosen = environmentNotice(opts.environment, environment);
  if (chosen && !opts.json) process.stderr.write(chalk.yellow(`notice: ${chosen}\n`));
  const sandbox = sandboxKind(opts);
  if (sandbox === 'none')
    throw new PolarError(
      'POLAR_USAGE',
      'Harbor tasks run in the sandbox (bubblewrap), which gives them their container paths; install bubblewrap or drop --sandbox none',
    );
  const results = await checkTasks(
    tasks,
    {
      sandbox,
      limits: limitsFrom(opts),
      timeoutSec: opts.timeout,
      initWorkers: opts.concurrency,
      postWorkers: opts.concurrency,
      concurrency: opts.concurrency,
      ...(opts.network ? { network: opts.network } : {}),
      ...(environment !== 'host' ? { environment } : {}),
    },
    (line) => {
      if (!opts.json) process.stderr.write(chalk.yellow(`${line}\n`));
    },
    opts.forge,
  );
  const broken = results.filter((r) => !r.ok);
  if (opts.json)
    printJson({
      ok: broken.length === 0,
      tasks: results.length,
      environment,
      forge: opts.forge,
      broken: broken.map((r) => r.task),
      hackable: results.filter((r) => r.hackable.length > 0).map((r) => r.task),
      results,
    });
  else process.stdout.write(`${report(results, opts.forge)}\n`);
  process.exitCode = broken.length === 0 ? 0 : 1;
}

function report(results: readonly TaskCheck[], forge: boolean): string {
  const lines: string[] = [];
  for (const r of results) {
    const rewards = (run: TaskCheck['oracle']) =>
      run.reward === null ? run.outcome : `${run.reward}${run.rewards && Object.keys(run.rewards).length > 1 ? ` ${JSON.stringify(run.rewards)}` : ''}`;
    const tried = Object.keys(r.forgeries).length;
    const forged = !forge
      ? ''
      : r.hackable.length > 0
        ? `, hackable: ${r.hackable.join(', ')}`
        : `, ${tried} forger${tried === 1 ? 'y' : 'ies'} tried, none won`;
    lines.push(`${r.ok ? chalk.green('ok    ') : chalk.red('BROKEN')} ${r.name}  oracle ${rewards(r.oracle)}, nop ${rewards(r.nop)}${forged}`);
    for (const p of r.problems) lines.push(`       ${p}`);
    if (r.problems.some((p) => !p.startsWith('hackable: '))) {
      const out = (r.oracle.reward === null || r.problems.some((x) => x.includes('oracle')) ? r.oracle.output : r.nop.output)?.trim();
      if (out)
        lines.push(
          ...out
            .split('\n')
            .slice(-10)
            .map((l) => chalk.dim(`       | ${l}`)),
        );
    }
  }
  const broken = results.filter((r) => !r.ok).length;
  const hackable = results.filter((r) => r.hackable.length > 0).length;
  lines.push(
    '',
    broken === 0
      ? chalk.green(
          `all ${results.length} tasks are sound: every oracle reaches its top reward, no nop earns any${forge ? ' and no forgery beats a verifier' : ''}`,
        )
      : chalk.red(`${broken} of ${results.length} tasks are broken${hackable > 0 ? ` (${hackable} hackable)` : ''}`),
  );
  if (!forge) lines.push(chalk.yellow('forgeries not tried (--no-forge): whether a verifier can be gamed was not checked'));
  return lines.join('\n');
}
