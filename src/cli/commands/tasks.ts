import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { checkTasks } from '../../rollout/checking/check.js';
import { environmentNotice } from '../../rollout/environments/choose.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { invalidTasksText, isHarborPath, readHarborSuite } from '../../rollout/harbor/load.js';
import { readTaskFile } from '../../rollout/task-file.js';
import { addSandboxOptions, limitsFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import { integerArg, secondsArg } from '../numbers.js';
import { action, printJson } from '../output.js';
import { byVerdict, type CheckResult, checkExitCode, checkReport, invalidChecks } from './tasks-report.js';
import { REWARD_RANGE_HELP, rewardKeyArg, rewardRangeArg } from './rollout/flags.js';

interface CheckOptions extends SandboxFlags {
  json?: boolean;
  environment?: EnvironmentName;
  concurrency: number;
  timeout: number;
  /** false with --no-forge. */
  forge: boolean;
  strict?: boolean;
  rewardKey?: string;
  rewardRange?: [number, number];
}

export function registerTasks(program: Command): void {
  const tasks = program.command('tasks').description('task suites (Harbor task folders, JSONL task files): validate them before spending GPU hours');
  const check = tasks
    .command('check')
    .description(
      "run every task with the oracle (solution/solve.sh; a JSONL task's \"solution\" commands, where it has them), with nop (nothing) and with each known forgery that applies (forge:<name>), and give each a verdict: valid; broken (its oracle misses its top reward, its nop earns reward, or its verifier pays a forgery more than nop: hackable; or a forger's sample ends in error where it must score 0: escapes its group); unverifiable here (this machine could not tell: an image it cannot build or pull, a verifier that needs the network, a start that failed for the machine's reason, a Harbor feature this environment does not run, a JSONL task without \"solution\", or a task polar could not run as written here: its agent user, a separate verifier's image or a build-time download on the host, a GPU; each naming it, with the way out); unsupported (it needs a Harbor feature polar does not implement yet, named); invalid (the task does not load: Harbor's own rules, cited; skipped). Exit status 1 when a task is broken; unverifiable and invalid tasks are said and exit 0 unless --strict",
    )
    .argument('<path>', "a Harbor task folder, a folder of them, or a JSONL task file (polar's own format, as polar rollout --tasks takes)")
    .addOption(environmentOption())
    .option('--concurrency <k>', 'tasks at once', integerArg('--concurrency', 1, 64), 2)
    .option('--timeout <seconds>', "a trial's budget when its task.toml gives no [agent].timeout_sec", secondsArg('--timeout'), 600)
    .option('--reward-key <name>', "the metric of a verifier's reward.json that is the reward, as polar rollout --reward-key", rewardKeyArg)
    .option('--reward-range <lo,hi>', `${REWARD_RANGE_HELP}, as polar rollout --reward-range`, rewardRangeArg)
    .option('--no-forge', 'skip the forgeries: only the oracle and nop (faster; says nothing about whether a verifier can be gamed)')
    .option('--strict', 'exit 1 also when a task is unverifiable here, unsupported or invalid, not only when one is broken')
    .option('--json', 'print the result as JSON');
  addSandboxOptions(check, 'the oracle and verifier').action(action(tasksCheck));
}

async function tasksCheck(p: string, opts: CheckOptions): Promise<void> {
  // A JSONL task file is read whole, every problem a usage error (task-file.ts), as polar rollout
  // reads it. A Harbor suite task by task: an invalid task is reported and skipped; a single task
  // folder that is invalid is a usage error.
  const jsonl = !isHarborPath(p);
  const suite = jsonl ? { tasks: readTaskFile(p), invalid: [], single: false } : readHarborSuite(p);
  if (suite.single && suite.invalid.length > 0) throw new PolarError('POLAR_USAGE', `the Harbor task has ${invalidTasksText(suite.invalid)}`);
  const { tasks } = suite;
  const environment = harborEnvironment(
    opts.environment,
    tasks.some((t) => t.harbor !== undefined),
  );
  const chosen = environmentNotice(opts.environment, environment);
  if (chosen && !opts.json) process.stderr.write(chalk.yellow(`notice: ${chosen}\n`));
  const sandbox = sandboxKind(opts);
  if (sandbox === 'none')
    throw new PolarError(
      'POLAR_USAGE',
      jsonl
        ? "the built-in agents (oracle, nop, the forgers) run in the sandbox (bubblewrap), as a model's agent would; install bubblewrap or drop --sandbox none"
        : 'Harbor tasks run in the sandbox (bubblewrap), which gives them their container paths; install bubblewrap or drop --sandbox none',
    );
  const checked = await checkTasks(
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
      ...(opts.rewardKey !== undefined ? { rewardKey: opts.rewardKey } : {}),
      ...(jsonl ? { tasksFile: p } : {}),
      ...(opts.rewardRange !== undefined ? { rewardRange: opts.rewardRange } : {}),
    },
    (line) => {
      if (!opts.json) process.stderr.write(chalk.yellow(`${line}\n`));
    },
    opts.forge,
  );
  const results: CheckResult[] = [...checked, ...invalidChecks(suite.invalid)].sort((a, b) => a.task.localeCompare(b.task));
  const strict = opts.strict === true;
  const verdicts = byVerdict(results);
  if (opts.json)
    printJson({
      ok: checkExitCode(results, strict) === 0,
      tasks: results.length,
      environment,
      forge: opts.forge,
      strict,
      ...verdicts,
      hackable: results.filter((r) => r.hackable.length > 0).map((r) => r.task),
      escapes: results.filter((r) => r.escapes.length > 0).map((r) => r.task),
      results,
    });
  else process.stdout.write(`${checkReport(results, opts.forge, strict)}\n`);
  process.exitCode = checkExitCode(results, strict);
}
