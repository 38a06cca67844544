import { compactionNotice, MASKED_SHARE_WARNING } from '../../rollout/sample-mask.js';
import { getHarness } from '../../harness/registry.js';
import fs from 'node:fs';
import path from 'node:path';
import chalk from 'chalk';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { writePrivateFile } from '../../core/private-file.js';
import { urlPassword, withoutPassword } from '../../store/postgres/password.js';
import { isPostgresUrl } from '../../store/postgres/url.js';
import { newId } from '../../core/ids.js';
import { HARNESS_NAMES } from '../../harness/registry.js';
import { findBwrap, UNSANDBOXED_GROUPS } from '../../sandbox/index.js';
import { loadTasks } from '../../rollout/load-tasks.js';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { exportLines } from '../../trajectory/export/select.js';
import { emptyStats } from '../../trajectory/reconstruct.js';
import { getStrategy } from '../../trajectory/registry.js';
import { latestCheckpoint, launch, prepareGrpo, prepareSft, type PreparedRun, type TrainUpdate } from '../../train/run-train.js';
import { initialProgress, maskedWarning, zeroAdvantageWarning } from '../../train/progress.js';
import { DEFAULT_INFRA_RETRIES, DEFAULT_MAX_FAILED_SHARE } from '../../train/gym-agent/agent.js';
import { getKey } from '../../train/nemo-rl/config.js';
import type { Yaml } from '../../train/yaml.js';
import { DEFAULT_SESSION_TOKENS, SESSION_TURNS, TURN_TOKENS, type FirstPrompt } from '../../train/first-prompt.js';
import { BUNDLED_QWEN3 } from '../../core/bundled-tokenizer.js';
import { UPSTREAM_KINDS } from '../../upstream/types.js';
import { integerArg, numberArg, secondsArg } from '../numbers.js';
import { action, invokedAs, printJson } from '../output.js';
import { count } from '../plural.js';
import { checkNemoRlCheckout } from '../../train/nemo-rl/check-command.js';
import { agentBin } from '../../train/agent-bin.js';
import { parseAgentHost, type RemoteAgent } from '../../train/gym-agent/wiring.js';
import type { EnvironmentName } from '../../rollout/environments/names.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { REWARD_RANGE_HELP, rewardKeyArg, rewardRangeArg } from './rollout/flags.js';
import { thinkingOption } from '../upstream-options.js';
import type { ThinkingSetting } from '../../upstream/sampling-policy.js';

interface CommonFlags {
  nemoRl: string;
  model: string;
  gpus: number;
  steps: number;
  maxSeqLen: number;
  lora?: boolean;
  set?: string[];
  config?: string;
  runDir?: string;
  dryRun?: boolean;
  resume?: boolean;
  db?: string;
  json?: boolean;
}

interface GrpoFlags extends CommonFlags {
  tasks: string;
  harness: string;
  promptsPerStep: number;
  groupSize: number;
  upstreamKind: string;
  tokenizer?: string;
  toolParser: string;
  thinking?: ThinkingSetting;
  timeout: number;
  sandbox?: 'bwrap' | 'none';
  allowUnsandboxed?: boolean;
  environment?: EnvironmentName;
  rewardKey?: string;
  rewardRange?: [number, number];
  agentConcurrency: number;
  command?: string;
  harnessBin?: string;
  node?: string;
  sessionTokens: number;
  infraRetries: number;
  maxFailedShare: number;
  agentHost?: RemoteAgent[];
  localAgent: boolean;
  maxMaskedShare?: number;
}

interface SftFlags extends CommonFlags {
  data?: string;
  minReward?: number;
  accepted?: boolean;
  rollout?: string;
  batchSize: number;
}

export function registerTrain(program: Command): void {
  const train = program
    .command('train')
    .description('train with NeMo-RL on a local NVIDIA GPU: GRPO with polar as the NeMo Gym agent, or SFT from accepted rollouts');
  common(
    train
      .command('grpo')
      .description(
        'GRPO through NeMo-RL: NeMo Gym calls polar gym-agent for every sample; each runs a harness through polar and is rewarded by its task evaluator',
      )
      .requiredOption('--tasks <path>', 'the rollout task file (JSONL), or a Harbor task folder or a folder of them (see polar rollout --help)')
      .addOption(new Option('--harness <name>', 'the harness every sample runs').choices([...HARNESS_NAMES]).makeOptionMandatory())
      .option('--prompts-per-step <p>', 'tasks per GRPO step (grpo.num_prompts_per_step)', integerArg('--prompts-per-step', 1, 100_000), 2)
      .option('--group-size <g>', 'samples per task: the GRPO group (grpo.num_generations_per_prompt)', integerArg('--group-size', 1, 1024), 4)
      .addOption(new Option('--upstream-kind <kind>', "how polar talks to NeMo-RL's vLLM server").choices([...UPSTREAM_KINDS]).default('nemo-rl'))
      .option('--tokenizer <path>', 'for vllm-tito / sglang-tito upstream kinds')
      .option('--tool-parser <name>', "vLLM's tool parser on NeMo-RL's HTTP server", 'hermes')
      .addOption(thinkingOption())
      .option('--timeout <seconds>', "a sample's budget when its task gives none", secondsArg('--timeout'), 1800)
      .addOption(new Option('--sandbox <kind>', 'bwrap (default when installed) or none').choices(['bwrap', 'none']))
      .option(
        '--allow-unsandboxed',
        "run with --sandbox none anyway: only for a harness whose first prompt names no path (the preflight still compares two samples' first prompts)",
      )
      .addOption(environmentOption())
      .option('--reward-key <name>', "the metric of a Harbor verifier's reward.json that is the reward, as polar rollout --reward-key", rewardKeyArg)
      .option('--reward-range <lo,hi>', `${REWARD_RANGE_HELP}, as polar rollout --reward-range`, rewardRangeArg)
      .option('--agent-concurrency <k>', 'harness sessions the agent runs at once', integerArg('--agent-concurrency', 1, 1024), 4)
      .option(
        '--agent-host <host:port>',
        'a polar gym-agent another machine runs (started there with --host, --port and --allow-from this node); repeat for more: rows are spread over all agents by task',
        agentHostArg,
      )
      .option('--no-local-agent', 'with --agent-host: NeMo Gym starts no agent on this node; every row goes to the --agent-host agents')
      .option('--command <template>', 'for --harness custom')
      .option('--harness-bin <path>', 'the harness executable')
      .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
      .option(
        '--infra-retries <n>',
        "the agent runs a sample again this many times when its workspace, setup or harness start fails (a masked sample's reward still enters its group's baseline)",
        integerArg('--infra-retries', 0, 100),
        DEFAULT_INFRA_RETRIES,
      )
      .option(
        '--max-failed-share <f>',
        "the agent stops NeMo-RL once more than this share of a step's samples failed outside the policy; 1 never stops",
        numberArg('--max-failed-share', 0, 1),
        DEFAULT_MAX_FAILED_SHARE,
      )
      .option(
        '--max-masked-share <f>',
        "the agent stops NeMo-RL once more than this share of a step's samples was masked (they train nothing); default: only warn, above 0.25",
        numberArg('--max-masked-share', 0, 1),
      )
      .option(
        '--session-tokens <n>',
        `tokens a useful session needs after the harness's first prompt: --max-seq-len must hold both (default ${SESSION_TURNS} turns of ${TURN_TOKENS})`,
        integerArg('--session-tokens', 0, 10_000_000),
        DEFAULT_SESSION_TOKENS,
      ),
  ).action(action(grpo));
  common(
    train
      .command('sft')
      .description('SFT through NeMo-RL on openai_format examples: a file, or exported from a database (accepted rollout samples)')
      .option('--data <file>', 'openai_format JSONL ({messages, tools} per line)')
      .option('--min-reward <r>', 'with --db: only traces with at least this reward', numberArg('--min-reward', -1e308, 1e308))
      .option('--accepted', "with --db: only samples a rollout's --accept accepted")
      .option('--rollout <id>', 'with --db: only this rollout')
      .option('--batch-size <n>', 'policy.train_global_batch_size', integerArg('--batch-size', 1, 100_000), 32),
  ).action(action(sft));
  train
    .command('check-nemo-rl <path>')
    .description(
      "read a NeMo-RL checkout against polar's pinned list (fixtures/nemo-rl/contract.json): files, moved or gone config reads, keys the merged configs lack, the Gym submodule; train grpo|sft does this in preflight",
    )
    .option('--json', 'print both reports as JSON')
    .action(action(checkNemoRl));
}

/** `--agent-host`, repeatable; a bad value is refused by commander before the command starts (exit 2). */
function agentHostArg(value: string, prev: RemoteAgent[] | undefined): RemoteAgent[] {
  try {
    return [...(prev ?? []), parseAgentHost(value)];
  } catch (err) {
    // commander's error takes a message only: the cause rides along as ES2022's Error.cause.
    throw Object.assign(new InvalidArgumentError((err as Error).message), { cause: err });
  }
}

function common(command: Command): Command {
  return command
    .requiredOption('--nemo-rl <path>', 'a NeMo-RL checkout (git clone --recursive https://github.com/NVIDIA-NeMo/RL)')
    .requiredOption('--model <name>', 'the policy: a Hugging Face id or a local folder')
    .option(
      '--gpus <n>',
      "GPUs to use: the first n of CUDA_VISIBLE_DEVICES when set, else 0..n-1 (each step's batch is split over them in whole micro-batches)",
      integerArg('--gpus', 1, 64),
      1,
    )
    .option('--steps <n>', 'training steps', integerArg('--steps', 1, 10_000_000), 20)
    .option(
      '--max-seq-len <n>',
      "policy.max_total_sequence_length (also vLLM max_model_len; sft: data.max_input_seq_length); left at the default, grpo raises it to fit the harness's first prompt and a session, sft to fit the longest example",
      integerArg('--max-seq-len', 256, 10_000_000),
      16384,
    )
    .option('--lora', 'train LoRA adapters (policy.dtensor_cfg.lora_cfg.enabled)')
    .option('--set <key=value...>', 'any NeMo-RL config key, e.g. --set loss_fn.reference_policy_kl_penalty=0.001')
    .option('--config <file>', "a YAML merged over polar's config (before --set)")
    .option('--run-dir <dir>', 'where the config, data, log, metrics and checkpoints go (default: ./polar-train/<kind>-<id>)')
    .option('--dry-run', 'write the run directory and print the files and the command; start nothing')
    .option('--resume', 'continue from the newest checkpoint in --run-dir')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print the result as JSON');
}

async function grpo(opts: GrpoFlags, command: Command): Promise<void> {
  const tasks = loadTasks(opts.tasks, (line) => process.stderr.write(chalk.yellow(`${line}\n`)));
  const runDir = path.resolve(opts.runDir ?? path.join('polar-train', `grpo-${newId('run').slice(4)}`));
  const db = opts.db ?? defaultDbPath();
  const dbPath = isPostgresUrl(db) ? db : path.resolve(db);
  const sandbox = opts.sandbox ?? (findBwrap() ? 'bwrap' : 'none');
  if (sandbox === 'none' && !opts.allowUnsandboxed)
    throw new PolarError(
      'POLAR_USAGE',
      `polar train grpo needs the bubblewrap sandbox: ${UNSANDBOXED_GROUPS}. ${opts.sandbox ? 'Drop --sandbox none' : 'Install bubblewrap (Debian: apt-get install bubblewrap)'}, or pass --allow-unsandboxed for a harness whose first prompt names no path`,
    );
  // Decided here, so the agent NeMo Gym starts runs where this command said it would.
  const environment = harborEnvironment(
    opts.environment,
    tasks.some((t) => t.harbor),
  );
  const agent = agentBin();
  const run = await prepared(runDir, opts, async () => {
    const agentArgs = [
      '--harness',
      opts.harness,
      '--tasks',
      path.resolve(opts.tasks),
      ...childDbArgs(dbPath, runDir),
      '--upstream-kind',
      opts.upstreamKind,
      '--timeout',
      String(opts.timeout),
      '--sandbox',
      sandbox,
      ...(tasks.some((t) => t.harbor) ? ['--environment', environment] : []),
      ...(opts.rewardKey !== undefined ? ['--reward-key', opts.rewardKey] : []),
      ...(opts.rewardRange !== undefined ? [`--reward-range=${opts.rewardRange.join(',')}`] : []),
      '--concurrency',
      String(opts.agentConcurrency),
      '--out',
      path.join(runDir, 'workspaces'),
      '--infra-retries',
      String(opts.infraRetries),
      '--max-failed-share',
      String(opts.maxFailedShare),
      ...(opts.maxMaskedShare !== undefined ? ['--max-masked-share', String(opts.maxMaskedShare)] : []),
      // NeMo-RL posts one step's rows at once: the failure share is taken over about one step.
      '--failure-window',
      String(opts.promptsPerStep * opts.groupSize),
      ...(opts.tokenizer ? ['--tokenizer', path.resolve(opts.tokenizer)] : []),
      // The agent pins every call's thinking switch to it (sampling-policy.ts); left out, the agent's
      // default `template` renders as NeMo-RL's own rollouts do.
      ...(opts.thinking !== undefined ? ['--thinking', opts.thinking] : []),
      ...(opts.command !== undefined ? ['--command', opts.command] : []),
      ...(opts.harnessBin ? ['--harness-bin', path.resolve(opts.harnessBin)] : []),
      ...(opts.node ? ['--node', path.resolve(opts.node)] : []),
    ];
    return prepareGrpo({
      ...commonOptions(opts, runDir),
      tasks,
      promptsPerStep: opts.promptsPerStep,
      groupSize: opts.groupSize,
      toolParser: opts.toolParser,
      sandbox,
      dbPath,
      agent: { node: process.execPath, polarBin: agent.bin, args: agentArgs },
      ...(opts.agentHost?.length ? { remoteAgents: opts.agentHost } : {}),
      localAgent: opts.localAgent,
      contextBudget: {
        harness: opts.harness,
        sessionTokens: opts.sessionTokens,
        // Left at its default, the sequence length grows to what the harness's first prompt needs.
        raiseMaxSeqLen: command.getOptionValueSource('maxSeqLen') === 'default',
        ...(opts.command !== undefined ? { command: opts.command } : {}),
        ...(opts.harnessBin ? { harnessBin: path.resolve(opts.harnessBin) } : {}),
        ...(opts.node ? { nodeBin: path.resolve(opts.node) } : {}),
        ...(opts.tokenizer ? { tokenizer: path.resolve(opts.tokenizer) } : {}),
        // The preflight renders two samples' first prompts in the sandbox the agent will use, with
        // the fixed paths the agent's samples get (the task folder the evaluator mounts counts).
        sandbox,
        tasksDir: path.dirname(path.resolve(opts.tasks)),
      },
    });
  });
  if (agent.warning) run.preflight.warnings.push(agent.warning);
  // The agent runs every sample append-only; what no setting of this harness stops is said now.
  const gap = compactionNotice(getHarness(opts.harness, opts.command !== undefined ? { command: opts.command } : {}), 'off');
  if (gap) run.preflight.warnings.push(gap);
  await execute(run, opts, dbPath, `polar train grpo · ${opts.model} · ${opts.harness} · ${count(tasks.length, 'task')} × ${opts.groupSize}`);
}

async function sft(opts: SftFlags, command: Command): Promise<void> {
  if (!opts.data && !opts.db)
    throw new PolarError('POLAR_USAGE', 'polar train sft needs --data FILE (openai_format JSONL) or --db FILE (export accepted rollout samples from it)');
  if (opts.data && (opts.minReward !== undefined || opts.accepted || opts.rollout))
    throw new PolarError('POLAR_USAGE', '--min-reward, --accepted and --rollout select from --db; with --data the file is used as it is');
  const runDir = path.resolve(opts.runDir ?? path.join('polar-train', `sft-${newId('run').slice(4)}`));
  const data = opts.data ? path.resolve(opts.data) : path.join(runDir, 'sft.jsonl');
  const run = await prepared(runDir, opts, async () => {
    if (!opts.data) {
      fs.mkdirSync(runDir, { recursive: true });
      await exportSft(opts, data);
    }
    return prepareSft({
      ...commonOptions(opts, runDir),
      data,
      batchSize: opts.batchSize,
      // Left at its default, the sequence length grows to hold the longest example.
      raiseMaxSeqLen: command.getOptionValueSource('maxSeqLen') === 'default',
    });
  });
  await execute(run, opts, null, `polar train sft · ${opts.model} · ${path.basename(data)}`);
}

/**
 * Prepares a run (files, preflight); when that throws, or preflight refuses a real run, what this
 * command created goes again: a refused run leaves no run directory behind to be mistaken for a run
 * (a dry run keeps its files, with the errors printed: the files are what it is for).
 */
async function prepared(runDir: string, opts: CommonFlags, prepare: () => Promise<PreparedRun>): Promise<PreparedRun> {
  // The outermost folder this command will create (polar-train/ itself on a first run).
  let created: string | null = null;
  for (let dir = runDir; !fs.existsSync(dir); dir = path.dirname(dir)) created = dir;
  try {
    const run = await prepare();
    if (!opts.dryRun && run.preflight.errors.length > 0)
      throw new PolarError('POLAR_USAGE', `cannot start ${run.kind}:\n  ${run.preflight.errors.join('\n  ')}`);
    return run;
  } catch (err) {
    if (created) fs.rmSync(created, { recursive: true, force: true });
    throw err;
  }
}

/** openai_format examples from the database, with the export's selection rules. */
async function exportSft(opts: SftFlags, file: string): Promise<string> {
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  try {
    const sessions = opts.rollout
      ? store.rollouts
          .samples(opts.rollout)
          .map((s) => s.sessionId)
          .filter((s): s is string => s !== null)
      : undefined;
    const lines: string[] = [];
    let left = 0;
    for (const item of exportLines(
      store,
      {
        format: 'sft',
        strategy: getStrategy('prefix-merging'),
        ...(sessions ? { sessions } : {}),
        minReward: opts.minReward ?? null,
        accepted: opts.accepted === true,
        includePartial: false,
      },
      emptyStats('prefix-merging'),
    )) {
      if ('line' in item) lines.push(JSON.stringify(item.line));
      else left++;
    }
    if (lines.length === 0)
      throw new PolarError(
        'POLAR_USAGE',
        `no SFT examples in ${opts.db ?? defaultDbPath()} with this selection (${count(left, 'trace')} left out); see \`polar export --format sft\` for the reasons`,
      );
    writePrivateFile(file, `${lines.join('\n')}\n`);
    if (!opts.json) process.stderr.write(`exported ${count(lines.length, 'SFT example')} to ${file} (${count(left, 'trace')} left out)\n`);
    return file;
  } finally {
    store.close();
  }
}

/** The measured first prompt, as the dry run prints it. */
function firstPromptLine(m: FirstPrompt, config: Yaml): string {
  return `${m.harness} ${m.version}: ${m.tokens} tokens (system prompt and ${m.tools} tools, ${m.tokenizer === BUNDLED_QWEN3 ? 'bundled Qwen3' : m.tokenizer} template${m.cached ? ', cached' : ''}); max_model_len ${String(getKey(config, 'policy.generation.vllm_cfg.max_model_len'))}`;
}

function checkNemoRl(checkout: string, opts: { json?: boolean }): void {
  const check = checkNemoRlCheckout(checkout);
  if (opts.json) printJson({ ok: check.errors.length === 0, ...check });
  else {
    for (const kind of ['grpo', 'sft'] as const) {
      const r = check.reports[kind];
      process.stdout.write(
        `${kind}: ${r.checkedReads} reads checked, ${r.moved.length} moved, ${r.gone.length} gone, ${r.missingFiles.length} files missing, ${r.missingKeys.length} keys missing after the merge, ${r.failedAsserts.length} asserts failed, ${r.newReads.length} new reads to review\n`,
      );
    }
    for (const w of check.warnings) process.stderr.write(`${chalk.yellow('warning')}: ${w}\n`);
    for (const e of check.errors) process.stderr.write(`${chalk.red('error')}: ${e}\n`);
    if (check.errors.length === 0 && check.warnings.length === 0)
      process.stdout.write(`${check.checkout} matches polar's pinned list (NeMo-RL ${check.reports.grpo.pinned.slice(0, 7)})\n`);
  }
  if (check.errors.length > 0) process.exitCode = 2;
}

function commonOptions(opts: CommonFlags, runDir: string) {
  return {
    nemoRl: path.resolve(opts.nemoRl),
    model: opts.model,
    runDir,
    gpus: opts.gpus,
    steps: opts.steps,
    maxSeqLen: opts.maxSeqLen,
    lora: opts.lora === true,
    sets: opts.set ?? [],
    ...(opts.config ? { extraConfig: opts.config } : {}),
    dryRun: opts.dryRun === true,
    resume: opts.resume === true,
    env: Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined)),
  };
}

/**
 * `--db` for the agent NeMo Gym starts: a PostgreSQL password never goes into its argv (anyone on the
 * machine reads argv with `ps`). One given in the URL (or by --db-password-file) goes to a 0600 file
 * in the run directory, which the agent reads with --db-password-file; PGPASSWORD and ~/.pgpass reach
 * it as they reach this process (NeMo-RL hands its environment on to NeMo Gym).
 */
function childDbArgs(dbPath: string, runDir: string): string[] {
  const password = isPostgresUrl(dbPath) ? urlPassword(dbPath) : null;
  if (password === null) return ['--db', dbPath];
  const file = path.join(runDir, 'db-password');
  fs.mkdirSync(runDir, { recursive: true });
  writePrivateFile(file, `${password}\n`);
  return ['--db', withoutPassword(dbPath), '--db-password-file', file];
}

async function execute(run: PreparedRun, opts: CommonFlags, dbPath: string | null, title: string): Promise<void> {
  const { errors, warnings } = run.preflight;
  const shell = fs
    .readFileSync(path.join(run.runDir, 'command.sh'), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .join('\n');
  if (opts.dryRun) {
    if (opts.json) {
      printJson({
        ok: errors.length === 0,
        runDir: run.runDir,
        files: run.files.map((f) => f.path),
        command: shell,
        ...(run.firstPrompt ? { firstPrompt: run.firstPrompt } : {}),
        warnings,
        errors,
      });
    } else {
      for (const f of run.files)
        process.stdout.write(
          `${chalk.bold(`── ${f.path}`)}\n${f.path.endsWith('.jsonl') ? `${f.content.split('\n').slice(0, 2).join('\n')}\n…\n` : f.content}\n`,
        );
      process.stdout.write(`${chalk.bold('command')}\n${shell}\n`);
      if (run.firstPrompt) process.stdout.write(`${chalk.bold('first prompt')}\n${firstPromptLine(run.firstPrompt, run.config)}\n`);
      for (const w of warnings) process.stderr.write(`${chalk.yellow('warning')}: ${w}\n`);
      for (const e of errors) process.stderr.write(`${chalk.red('error')}: ${e}\n`);
      process.stderr.write(`dry run: wrote ${run.runDir}; nothing started\n`);
    }
    if (errors.length > 0) process.exitCode = 2;
    return;
  }
  if (errors.length > 0) throw new PolarError('POLAR_USAGE', `cannot start ${run.kind}:\n  ${errors.join('\n  ')}`);
  for (const w of warnings) process.stderr.write(`${chalk.yellow('warning')}: ${w}\n`);
  if (run.firstPrompt && !opts.json) process.stderr.write(`first prompt: ${firstPromptLine(run.firstPrompt, run.config)}\n`);
  const startedAt = Date.now();
  const live = process.stderr.isTTY && !opts.json;
  // ink and react load only for the live view: a command's help and its --json runs do without them.
  const view = live
    ? (await import('../views/train-view.js')).startTrainView({
        title,
        runDir: run.runDir,
        initial: { progress: initialProgress(), gpuMemoryMiB: null, sessions: [] },
      })
    : null;
  let last: TrainUpdate | null = null;
  // Steps whose every advantage was 0, as NeMo-RL's TensorBoard events give them (run-train.ts; it
  // reads them to the end after NeMo-RL exits): such a step cannot move the policy.
  const zeroSteps: number[] = [];
  // Steps where more than a quarter of the samples were masked (polar_masked, from the same events).
  const maskedSteps: number[] = [];
  const code = await launch(run, {
    ...(dbPath ? { dbPath } : {}),
    startedAt,
    onUpdate: (u) => {
      last = u;
      // A step's advantages arrive after its results, from TensorBoard (NeMo-RL prints none).
      const judged = u.advantages;
      const zero = judged && !zeroSteps.includes(judged.step) ? zeroAdvantageWarning(judged) : null;
      if (zero) {
        zeroSteps.push(judged!.step);
        if (!view && !opts.json) process.stderr.write(`${chalk.red('warning')}: ${zero}\n`);
      }
      const masked = judged && !maskedSteps.includes(judged.step) ? maskedWarning(judged) : null;
      if (masked) {
        maskedSteps.push(judged!.step);
        if (!view && !opts.json) process.stderr.write(`${chalk.red('warning')}: ${masked}\n`);
      }
      if (view) view.update(u);
      else if (u.step && !opts.json) {
        process.stderr.write(
          `step ${u.step.step}/${u.step.maxSteps ?? '?'}${u.step.epoch !== null ? ` (epoch ${u.step.epoch})` : ''}: loss ${u.step.loss ?? '-'} · reward ${u.step.reward ?? '-'} · ${u.step.stepTimeS ?? '-'} s\n`,
        );
      }
    },
  }).finally(() => view?.stop());
  const progress = (last as TrainUpdate | null)?.progress ?? initialProgress();
  const checkpoint = latestCheckpoint(run.runDir);
  const result = {
    ok: code === 0,
    exitCode: code,
    runDir: run.runDir,
    steps: progress.completed.length,
    lastStep: progress.completed.at(-1) ?? null,
    checkpoint,
    log: path.join(run.runDir, 'train.log'),
    zeroAdvantageSteps: zeroSteps,
    maskedSteps,
  };
  if (opts.json) printJson(result);
  else {
    const status = code === 0 ? chalk.green('finished') : chalk.yellow(`stopped (exit ${code})`);
    process.stdout.write(
      `${chalk.bold(`polar train ${run.kind}`)} ${status}: ${count(result.steps, 'step')} here${checkpoint !== null ? `, newest checkpoint step_${checkpoint}` : ''}\n  log ${result.log}\n  metrics ${path.join(run.runDir, 'metrics.jsonl')}\n`,
    );
    if (zeroSteps.length > 0)
      process.stderr.write(
        `${chalk.red('warning')}: ${zeroSteps.length} of ${count(result.steps, 'step')} had every advantage 0 (steps ${zeroSteps.join(', ')}): they did not train the policy; see the step warnings above or train.log\n`,
      );
    if (maskedSteps.length > 0)
      process.stderr.write(
        `${chalk.red('warning')}: ${maskedSteps.length} of ${count(result.steps, 'step')} had more than ${MASKED_SHARE_WARNING * 100}% of their samples masked (steps ${maskedSteps.join(', ')}): those samples trained nothing; polar gym-agent says why in train.log\n`,
      );
    if (code !== 0 && checkpoint !== null) process.stdout.write(`  resume: ${invokedAs()} train ${run.kind} … --run-dir ${run.runDir} --resume\n`);
  }
  process.exitCode = code === 0 ? 0 : 1;
}
