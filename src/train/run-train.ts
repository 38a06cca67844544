import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { runCommand } from '../core/process/command.js';
import { startSupervised } from '../core/process/supervised.js';
import type { HarnessCommand } from '../harness/types.js';
import type { RolloutTask } from '../rollout/task-file.js';
import { recentSessions, type TrainSession } from '../store/train-runs.js';
import { agentNames, appSource, gymRows, type RemoteAgent, writeGymWiring } from './gym-agent/wiring.js';
import { applySet, getKey, GRPO_BASE, GRPO_SCRIPT, grpoConfig, mergeConfig, SFT_BASE, SFT_SCRIPT, sftConfig } from './nemo-rl/config.js';
import { budgetProblem, longestTaskPrompt, measureFirstPrompt, neededSeqLen, splitProblem, type FirstPrompt } from './first-prompt.js';
import { preflight, visibleDevices, type Preflight } from './preflight.js';
import { contractChecks } from './nemo-rl/preflight-contract.js';
import { fitSftBatch } from './sft-batch.js';
import { sftLengthChecks, sftNeededSeqLen, sizeSftData } from './sft-length.js';
import { initialProgress, readLine, type StepMetrics, type TrainProgress } from './progress.js';
import { type Scalar, stepAdvantages, stepMasked, TensorboardScalars } from './tensorboard.js';
import { parseYaml, toYaml, type Yaml } from './yaml.js';

/** Shared by `train grpo` and `train sft`. */
export interface TrainCommon {
  nemoRl: string;
  model: string;
  runDir: string;
  gpus: number;
  steps: number;
  maxSeqLen: number;
  lora: boolean;
  sets: readonly string[];
  extraConfig?: string;
  dryRun: boolean;
  resume: boolean;
  /** The environment NeMo-RL runs with (the user's: HF_HOME, HF_TOKEN, WANDB_API_KEY …). */
  env: Record<string, string>;
}

export interface GrpoOptions extends TrainCommon {
  tasks: readonly RolloutTask[];
  promptsPerStep: number;
  groupSize: number;
  toolParser: string;
  /** The database the agent records into (absolute). */
  dbPath: string;
  /** How the generated app.py starts polar: this Node and this polar, with `gym-agent` flags. */
  agent: { node: string; polarBin: string; args: string[] };
  /** `polar gym-agent`s on other machines that Gym calls too (`--agent-host`); rows are spread over all agents by task. */
  remoteAgents?: readonly RemoteAgent[];
  /** Whether Gym also starts the agent on this node (default true; `--no-local-agent`). */
  localAgent?: boolean;
  /** Measure the harness's first prompt and refuse a `maxSeqLen` that cannot hold a session (first-prompt.ts). */
  contextBudget?: ContextBudgetInput;
  /** The agent's sandbox: preflight probes bwrap, which the agent would first try with the model loaded. */
  sandbox?: 'bwrap' | 'none';
}

export interface ContextBudgetInput {
  harness: string;
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  tokenizer?: string;
  /** Tokens a useful session needs after the first prompt. */
  sessionTokens: number;
  /** Where measurements are cached (default: polar's state dir). */
  cacheDir?: string;
  /** The sandbox the agent runs samples in: the first-prompt probe runs its two samples in the same. */
  sandbox?: 'bwrap' | 'none';
  /** The task file's folder, which the agent's evaluators mount: it decides the fixed paths too. */
  tasksDir?: string;
  /** `maxSeqLen` was not chosen by the user: raise it to what the harness needs. */
  raiseMaxSeqLen?: boolean;
}

export interface SftOptions extends TrainCommon {
  /** openai_format examples (written by polar export, or given). */
  data: string;
  batchSize: number;
  /** `maxSeqLen` was not chosen by the user: raise it to hold the longest example (sft-length.ts). */
  raiseMaxSeqLen?: boolean;
}

/** A run directory ready to launch: its files, the exact command, and what preflight found. */
export interface PreparedRun {
  kind: 'grpo' | 'sft';
  runDir: string;
  files: { path: string; content: string }[];
  command: HarnessCommand & { cwd: string };
  preflight: Preflight;
  config: Yaml;
  /** GRPO: the harness's first prompt as measured for the context-budget check. */
  firstPrompt?: FirstPrompt | null;
}

export async function prepareGrpo(o: GrpoOptions): Promise<PreparedRun> {
  const runDir = path.resolve(o.runDir);
  const remotes = o.remoteAgents ?? [];
  if (o.localAgent === false && remotes.length === 0)
    throw new PolarError('POLAR_USAGE', '--no-local-agent needs --agent-host HOST:PORT: no agent would answer the rows');
  guardCheckpoints(runDir, o.resume);
  fs.mkdirSync(runDir, { recursive: true });
  const trainData = path.join(runDir, 'train.jsonl');
  const local = o.localAgent !== false;
  const wiring = await writeGymWiring(runDir, o.agent, remotes, local);
  const budget = o.contextBudget ? await measureBudget(o.contextBudget, o) : null;
  // Not chosen by the user: at least the default, raised to what the harness needs.
  const maxSeqLen = o.contextBudget?.raiseMaxSeqLen && budget && 'need' in budget ? Math.max(o.maxSeqLen, budget.need) : o.maxSeqLen;
  let config = grpoConfig({
    nemoRl: path.resolve(o.nemoRl),
    model: o.model,
    runDir,
    gpus: o.gpus,
    steps: o.steps,
    promptsPerStep: o.promptsPerStep,
    groupSize: o.groupSize,
    maxSeqLen,
    lora: o.lora,
    tasks: o.tasks.length,
    trainData,
    agentConfig: wiring.agentConfig,
    toolParser: o.toolParser,
    savePeriod: 10,
  });
  config = customize(config, o);
  const globalBatch = getKey(config, 'policy.train_global_batch_size');
  const files = [
    { path: path.join(runDir, 'grpo.yaml'), content: header('GRPO with NeMo Gym; polar serves the agent (gym/)') + toYaml(config) },
    { path: trainData, content: gymRows(o.tasks, agentNames(remotes, local)) },
    // NeMo-RL's server lists no models, so the agent learns the context window from here: harnesses
    // size their output and compaction by it (Claude Code would otherwise assume 200k and overflow).
    { path: wiring.appPy, content: appSource({ ...o.agent, args: [...o.agent.args, ...contextWindowArgs(config), ...samplingArgs(config)] }) },
  ];
  const checks = await preflight({
    nemoRl: o.nemoRl,
    needs: [GRPO_SCRIPT, GRPO_BASE],
    model: o.model,
    gpus: o.gpus,
    dryRun: o.dryRun,
    env: o.env,
    groupSize: o.groupSize,
    ...(typeof globalBatch === 'number' ? { globalBatch } : {}),
    tasks: o.tasks.length,
    promptsPerStep: o.promptsPerStep,
    ...(o.sandbox ? { sandbox: o.sandbox } : {}),
  });
  const firstPrompt = budget ? budgetChecks(budget, config, o, checks) : null;
  contractChecks(o.nemoRl, 'grpo', config, runDir, checks);
  return { ...finish('grpo', runDir, files, config, checks, GRPO_SCRIPT, { ...o.env, NEMO_GYM_EXTRA_ROOTS: wiring.root }, o), firstPrompt };
}

/** `--context-window` for the agent: vLLM's max_model_len as the config will run. */
function contextWindowArgs(config: Yaml): string[] {
  const len = getKey(config, 'policy.generation.vllm_cfg.max_model_len');
  return typeof len === 'number' && len > 0 ? ['--context-window', String(len)] : [];
}

/**
 * `--temperature` / `--top-p` for the agent: policy.generation's pair as the config will run, the
 * sampling the agent pins where a row gives none (NeMo-RL asserts every request carries it).
 */
export function samplingArgs(config: Yaml): string[] {
  const temperature = getKey(config, 'policy.generation.temperature');
  const topP = getKey(config, 'policy.generation.top_p');
  return [...(typeof temperature === 'number' ? ['--temperature', String(temperature)] : []), ...(typeof topP === 'number' ? ['--top-p', String(topP)] : [])];
}

type Budget = { measured: FirstPrompt; taskTokens: number; need: number } | { failed: string };

/**
 * The context budget: the harness's first prompt (measured, cached) plus the longest task's text and
 * a useful session must fit in the sequence length, else every call of a session is refused upstream
 * and every sample masked.
 */
async function measureBudget(b: ContextBudgetInput, o: GrpoOptions): Promise<Budget> {
  try {
    const measured = await measureFirstPrompt({ ...b, model: o.model });
    const taskTokens = longestTaskPrompt(
      measured.tokenizer,
      o.tasks.map((t) => t.prompt),
    );
    return { measured, taskTokens, need: neededSeqLen(measured.tokens, taskTokens, b.sessionTokens) };
  } catch (err) {
    return { failed: `could not measure ${b.harness}'s first prompt, so the sequence length is unchecked: ${(err as Error).message}` };
  }
}

/**
 * Checked against the config as it will run (after --config and --set): vLLM's max_model_len is
 * what refuses a prompt. A measurement that could not be made is an error for a run (the agent
 * would run the same harness) and a warning for `--dry-run`.
 */
function budgetChecks(budget: Budget, config: Yaml, o: GrpoOptions, checks: Preflight): FirstPrompt | null {
  if ('failed' in budget) {
    (o.dryRun ? checks.warnings : checks.errors).push(budget.failed);
    return null;
  }
  if (budget.measured.note) checks.warnings.push(budget.measured.note);
  const lens = [getKey(config, 'policy.generation.vllm_cfg.max_model_len'), getKey(config, 'policy.max_total_sequence_length')].filter(
    (v): v is number => typeof v === 'number',
  );
  const maxSeqLen = lens.length > 0 ? Math.min(...lens) : o.maxSeqLen;
  const problem = budgetProblem(budget.measured, budget.taskTokens, maxSeqLen, o.contextBudget!.sessionTokens);
  if (problem) checks.errors.push(problem);
  // Two samples' first prompts must be one token sequence, or every group splits (first-prompt-probe.ts).
  const split = splitProblem(budget.measured, o.contextBudget!.sandbox ?? 'bwrap');
  if (split) checks.errors.push(split);
  return budget.measured;
}

export async function prepareSft(o: SftOptions): Promise<PreparedRun> {
  const runDir = path.resolve(o.runDir);
  guardCheckpoints(runDir, o.resume);
  fs.mkdirSync(runDir, { recursive: true });
  const sftPlan = (maxSeqLen: number) =>
    customize(
      sftConfig({
        nemoRl: path.resolve(o.nemoRl),
        model: o.model,
        runDir,
        gpus: o.gpus,
        steps: o.steps,
        maxSeqLen,
        lora: o.lora,
        data: path.resolve(o.data),
        batchSize: o.batchSize,
      }),
      o,
    );
  let config = sftPlan(o.maxSeqLen);
  // Every example sized with the model's template, as NeMo-RL counts it (sft-length.ts); left at
  // its default, the sequence length grows to hold the longest, else NeMo-RL drops it from the loss.
  const sizing = sizeSftData(path.resolve(o.data), o.model, config, o.env);
  const need = sizing && 'lengths' in sizing ? sftNeededSeqLen(sizing.lengths) : 0;
  const raised = o.raiseMaxSeqLen === true && need > o.maxSeqLen;
  if (raised) config = sftPlan(need);
  const batch = sftBatch(config, path.resolve(o.data), o.gpus);
  if (batch && 'batch' in batch) config = applySet(config, `policy.train_global_batch_size=${batch.batch}`);
  const files = [{ path: path.join(runDir, 'sft.yaml'), content: header('SFT on openai_format examples') + toYaml(config) }];
  const checks = await preflight({ nemoRl: o.nemoRl, needs: [SFT_SCRIPT, SFT_BASE], model: o.model, gpus: o.gpus, dryRun: o.dryRun, env: o.env });
  if (batch && 'error' in batch) checks.errors.push(batch.error);
  else if (batch?.notice) checks.warnings.push(batch.notice);
  sftLengthChecks(sizing, config, path.resolve(o.data), raised ? o.maxSeqLen : null, o.dryRun, checks);
  contractChecks(o.nemoRl, 'sft', config, runDir, checks);
  return finish('sft', runDir, files, config, checks, SFT_SCRIPT, o.env, o);
}

/**
 * The SFT batch fitted to the data (sft-batch.ts): the batch as configured (after --config and
 * --set), the data-parallel size from the GPUs and the parallel sizes the config names (1 where it
 * names none, as sft.yaml has them), one example per non-empty line. Null when the data is unreadable.
 */
function sftBatch(config: Yaml, data: string, gpus: number): ReturnType<typeof fitSftBatch> | null {
  const globalBatch = getKey(config, 'policy.train_global_batch_size');
  if (typeof globalBatch !== 'number' || !fs.existsSync(data)) return null;
  const size = (key: string) => {
    const v = getKey(config, key);
    return typeof v === 'number' && v > 0 ? v : 1;
  };
  const dataParallel = Math.max(1, Math.floor(gpus / (size('policy.dtensor_cfg.tensor_parallel_size') * size('policy.dtensor_cfg.context_parallel_size'))));
  const examples = fs
    .readFileSync(data, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '').length;
  return fitSftBatch({ examples, globalBatch, dataParallel, microBatch: size('policy.train_micro_batch_size') });
}

function finish(
  kind: 'grpo' | 'sft',
  runDir: string,
  files: PreparedRun['files'],
  config: Yaml,
  checks: Preflight,
  script: string,
  env: Record<string, string>,
  o: TrainCommon,
): PreparedRun {
  const configFile = files[0]!.path;
  for (const f of files) fs.writeFileSync(f.path, f.content);
  const command = {
    file: 'uv',
    args: ['run', 'python', script, '--config', configFile],
    // The first --gpus of the devices the user made visible (else 0..n-1): not GPUs 0..n-1 of a node
    // whose CUDA_VISIBLE_DEVICES gave this user other ones.
    env: { ...env, CUDA_VISIBLE_DEVICES: (visibleDevices(env) ?? Array.from({ length: o.gpus }, (_, i) => String(i))).slice(0, o.gpus).join(',') },
    cwd: path.resolve(o.nemoRl),
  };
  const shell = `cd ${quote(command.cwd)} && CUDA_VISIBLE_DEVICES=${command.env.CUDA_VISIBLE_DEVICES}${env.NEMO_GYM_EXTRA_ROOTS ? ` NEMO_GYM_EXTRA_ROOTS=${quote(env.NEMO_GYM_EXTRA_ROOTS)}` : ''} ${[command.file, ...command.args].map(quote).join(' ')}\n`;
  const commandFile = path.join(runDir, 'command.sh');
  fs.writeFileSync(commandFile, `#!/bin/sh\n# The command polar runs (or would run) for this ${kind} run.\n${shell}`, { mode: 0o755 });
  files.push({ path: commandFile, content: shell });
  return { kind, runDir, files, command, preflight: checks, config };
}

/** --config extra.yaml, then each --set, in order. */
function customize(config: Yaml, o: TrainCommon): Yaml {
  let out = config;
  if (o.extraConfig) {
    let extra: Yaml;
    try {
      extra = parseYaml(fs.readFileSync(o.extraConfig, 'utf8'));
    } catch (err) {
      throw new PolarError('POLAR_USAGE', `--config ${o.extraConfig}: ${(err as Error).message}`, undefined, { cause: err });
    }
    out = mergeConfig(out, extra);
  }
  for (const s of o.sets) out = applySet(out, s);
  return out;
}

/**
 * NeMo-RL resumes from the newest checkpoint in its checkpoint directory on its own, so a fresh run in
 * a directory that has checkpoints would silently continue an old one: that needs `--resume`.
 */
function guardCheckpoints(runDir: string, resume: boolean): void {
  const dir = path.join(runDir, 'checkpoints');
  const steps = fs.existsSync(dir) ? fs.readdirSync(dir).filter((d) => /^step_\d+$/.test(d)) : [];
  if (steps.length > 0 && !resume) {
    throw new PolarError(
      'POLAR_USAGE',
      `${runDir} already has checkpoints (${steps.sort().at(-1)}); NeMo-RL would continue from them: pass --resume, or another --run-dir`,
    );
  }
  if (resume && steps.length === 0) throw new PolarError('POLAR_USAGE', `--resume: ${runDir} has no checkpoints to resume from`);
}

/** The newest checkpoint step in a run directory, or null. */
export function latestCheckpoint(runDir: string): number | null {
  const dir = path.join(runDir, 'checkpoints');
  if (!fs.existsSync(dir)) return null;
  const steps = fs
    .readdirSync(dir)
    .map((d) => /^step_(\d+)$/.exec(d)?.[1])
    .filter((s): s is string => s !== undefined)
    .map(Number);
  return steps.length > 0 ? Math.max(...steps) : null;
}

export interface TrainUpdate {
  progress: TrainProgress;
  gpuMemoryMiB: number[] | null;
  sessions: TrainSession[];
  step?: StepMetrics;
  /** A completed step whose advantages just arrived from NeMo-RL's TensorBoard events (tensorboard.ts), after its stdout lines. */
  advantages?: StepMetrics;
}

/**
 * Runs NeMo-RL and watches it: every line goes to `train.log`, NeMo-RL's progress lines become
 * updates (and each finished step a line of `metrics.jsonl`), GPU memory is read from nvidia-smi,
 * and the agent's latest sessions with their rewards from the database. Ctrl-C is forwarded to
 * NeMo-RL's whole process group (SIGINT, then SIGKILL on a second); resolves with its exit code.
 */
export async function launch(run: PreparedRun, opts: { dbPath?: string; startedAt: number; onUpdate: (u: TrainUpdate) => void }): Promise<number> {
  // The run's steps, across epochs: NeMo-RL's banner counts only one epoch's (progress.ts).
  const maxSteps = getKey(run.config, `${run.kind}.max_num_steps`);
  const progress = initialProgress(typeof maxSteps === 'number' ? maxSteps : null);
  const metrics = fs.createWriteStream(path.join(run.runDir, 'metrics.jsonl'), { flags: 'a' });
  let gpu: number[] | null = null;
  let sessions: TrainSession[] = [];
  const update = (step?: StepMetrics) => opts.onUpdate({ progress, gpuMemoryMiB: gpu, sessions, ...(step ? { step } : {}) });
  // NeMo-RL logs advantages/* to TensorBoard only (polar's config turns it on): each step's arrive
  // after its stdout lines (SummaryWriter flushes every 2 minutes and at the end), so after its line
  // of metrics.jsonl too: they get a line of their own, `{"time","step","advantages"}`.
  const tensorboard = new TensorboardScalars(path.join(run.runDir, 'logs'), opts.startedAt);
  const advantageScalars: Scalar[] = [];
  const judged = new Set<number>();
  const readAdvantages = () => {
    advantageScalars.push(...tensorboard.poll().filter((s) => s.tag.startsWith('train/advantages/') || /^train\/[^/]+\/polar_masked/.test(s.tag)));
    const maskedShares = stepMasked(advantageScalars);
    for (const [step, advantages] of stepAdvantages(advantageScalars)) {
      const done = progress.completed.find((s) => s.step === step);
      if (!done || judged.has(step)) continue;
      judged.add(step);
      done.advantages = advantages;
      // Logged before the advantages in the same step (grpo.py:3022, :3762), so read with them.
      done.masked = maskedShares.get(step) ?? null;
      const masked = done.masked;
      // An interval's poll can outlive the run's end: nothing is written to a closed file.
      if (!metrics.writableEnded) metrics.write(`${JSON.stringify({ time: new Date().toISOString(), step, advantages, ...(masked ? { masked } : {}) })}\n`);
      opts.onUpdate({ progress, gpuMemoryMiB: gpu, sessions, advantages: { ...done, advantages, masked } });
    }
    // A step's masked share that arrived in a later poll than its advantages (another flush, another
    // event file) is added then, on a line of its own.
    for (const done of progress.completed) {
      const masked = judged.has(done.step) && !done.masked ? maskedShares.get(done.step) : undefined;
      if (!masked) continue;
      done.masked = masked;
      if (!metrics.writableEnded) metrics.write(`${JSON.stringify({ time: new Date().toISOString(), step: done.step, masked })}\n`);
      opts.onUpdate({ progress, gpuMemoryMiB: gpu, sessions, advantages: { ...done } });
    }
  };
  const child = startSupervised(run.command, {
    cwd: run.command.cwd,
    logFile: path.join(run.runDir, 'train.log'),
    onLine: (line) => {
      const step = readLine(progress, line);
      if (step)
        metrics.write(
          `${JSON.stringify({ time: new Date().toISOString(), ...step, gpu_memory_mib: gpu, sessions: sessions.length, session_reward_mean: mean(sessions.map((s) => s.reward)) })}\n`,
        );
      update(step ?? undefined);
    },
  });
  const watch = setInterval(() => {
    void (async () => {
      const smi = await runCommand('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { env: run.command.env, timeoutMs: 5000 });
      gpu = smi.failed || smi.exitCode !== 0 ? null : smi.stdout.trim().split('\n').filter(Boolean).map(Number);
      if (opts.dbPath) sessions = recentSessions(opts.dbPath, opts.startedAt);
      readAdvantages();
      update();
    })();
  }, 2000);
  let interrupts = 0;
  const onSignal = () => {
    interrupts++;
    child.signal(interrupts === 1 ? 'SIGINT' : 'SIGKILL');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const code = await child.done;
    progress.phase = 'done';
    // The last poll, after NeMo-RL exited (its SummaryWriter flushed on close): every step's
    // advantages are read before polar train reports which steps had all of them 0.
    readAdvantages();
    if (opts.dbPath) sessions = recentSessions(opts.dbPath, opts.startedAt);
    update();
    return code;
  } finally {
    clearInterval(watch);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await new Promise<void>((resolve) => metrics.end(resolve));
  }
}

function mean(values: (number | null)[]): number | null {
  const v = values.filter((x): x is number => x !== null);
  return v.length > 0 ? v.reduce((a, b) => a + b, 0) / v.length : null;
}

function header(what: string): string {
  return `# Generated by polar: ${what}.\n# NeMo-RL reads it with --config; every key not set here comes from \`defaults\`.\n`;
}

function quote(s: string): string {
  return /^[\w./:=,@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
