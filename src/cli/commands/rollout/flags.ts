import path from 'node:path';
import chalk from 'chalk';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { PolarError } from '../../../core/errors.js';
import { HARNESS_NAMES } from '../../../harness/registry.js';
import type { RolloutConfig } from '../../../rollout/config.js';
import { BUILTIN_AGENTS, isBuiltinAgent } from '../../../rollout/agents/builtin.js';
import { harborPreflight } from '../../../rollout/harbor/trial.js';
import { FORGERY_NAMES } from '../../../rollout/forgeries/index.js';
import type { EnvironmentName } from '../../../rollout/environments/names.js';
import { loadTasks } from '../../../rollout/load-tasks.js';
import type { RolloutOverrides } from '../../../rollout/resume-config.js';
import { parseRewardRange } from '../../../rollout/reward-range.js';
import { isPostgresUrl } from '../../../store/postgres/url.js';
import { environmentOption, harborEnvironment } from '../../environment-option.js';
import { integerArg, secondsArg } from '../../numbers.js';
import { addSandboxOptions, limitsFrom, limitsGiven, readOnlyFrom, type SandboxFlags } from '../../sandbox-options.js';
import { addUpstreamOptions, upstreamOptionsFrom, type UpstreamFlags } from '../../upstream-options.js';

// `polar rollout`'s flags and the one mapping from them to the rollout's configuration. A new run,
// a queued run (`--queue`), the demo and a resume all take their config fields from `flagFields`:
// a config field is mapped once, here, and `ON_RESUME` must say what a resume does with it (the
// compiler asks for both; flags.test.ts checks that every flag reaches every path).

/** The options as commander hands them over. */
export interface RolloutOptions extends UpstreamFlags, SandboxFlags {
  tasks?: string;
  harness?: string;
  upstream?: string;
  model?: string;
  contextWindow?: number;
  samples?: number;
  concurrency: number;
  initWorkers: number;
  postWorkers: number;
  timeout: number;
  db?: string;
  out?: string;
  accept?: string;
  resume?: string;
  keepWorkspaces?: boolean;
  keepCompaction?: boolean;
  command?: string;
  harnessBin?: string;
  node?: string;
  json?: boolean;
  environment?: EnvironmentName;
  rewardKey?: string;
  rewardRange?: [number, number];
  queue?: string;
  wait?: boolean;
  retries: number;
  heartbeat: number;
}

/** The flags a new run maps (the queue's own, `--retries` and `--heartbeat`, go to the queue, not the config). */
export type RunFlags = Omit<RolloutOptions, 'retries' | 'heartbeat'>;

/**
 * Whether an option's value was given rather than commander's default. A new run takes defaults
 * as given; a resume must not (the default `--concurrency 2` would replace the stored 8).
 */
export type Given = (option: keyof RolloutOptions) => boolean;

/** Every value counts: a new run stores the defaults as chosen. */
export const ALL_GIVEN: Given = () => true;

/** What the user typed (or set some other way), not what commander filled in. */
export function givenOn(command: Command): Given {
  return (option) => {
    const source = command.getOptionValueSource(option);
    return source !== undefined && source !== 'default';
  };
}

/** A harness, a built-in agent, or `forge:<name>` of a forgery polar knows; the 14 forgers are listed only when one is mistyped. */
function harnessArg(value: string): string {
  if ((HARNESS_NAMES as readonly string[]).includes(value) || isBuiltinAgent(value)) return value;
  const err = new InvalidArgumentError(
    value.startsWith('forge:')
      ? `--harness ${value}: no such forgery; known: ${FORGERY_NAMES.map((n) => `forge:${n}`).join(', ')}`
      : `--harness must be one of ${[...HARNESS_NAMES, ...BUILTIN_AGENTS].join(', ')} or forge:<name>, got ${JSON.stringify(value)}`,
  );
  err.exitCode = 2;
  throw err;
}

/** A metric's name as a reward.json field: any non-empty text (Harbor's keys are JSON strings, verifier.py:102-108). */
export function rewardKeyArg(value: string): string {
  if (value.trim() === '') {
    const err = new InvalidArgumentError("--reward-key needs the name of a metric in the verifier's reward.json");
    err.exitCode = 2;
    throw err;
  }
  return value;
}

/** `--reward-range LO,HI` (reward-range.ts parseRewardRange), refused before the command starts, exit 2. */
export function rewardRangeArg(value: string): [number, number] {
  try {
    return [...parseRewardRange(value)];
  } catch (e) {
    const err = Object.assign(new InvalidArgumentError((e as Error).message), { cause: e });
    err.exitCode = 2;
    throw err;
  }
}

/** The help line every command offering --reward-range shares. */
export const REWARD_RANGE_HELP =
  'the rewards the rollout takes, LO,HI (default 0,1): a reward outside it, not finite, or not a plain decimal forfeits (scores LO, with the reason); for tasks scored on another scale';

/** The `rollout` command's options, in help order. */
export function addRolloutFlags(rollout: Command): Command {
  rollout
    .option('--tasks <path>', 'the task file (JSONL; see "Task file" below), or a Harbor task folder or a folder of them')
    .addOption(
      new Option(
        '--harness <name>',
        `the harness every session runs; oracle (solution/solve.sh), nop (nothing) and forge:<name> (a scripted forgery, see polar tasks check) for Harbor tasks, without a model (choices: ${[...HARNESS_NAMES, ...BUILTIN_AGENTS, 'forge:<name>'].map((n) => JSON.stringify(n)).join(', ')})`,
      ).argParser(harnessArg),
    )
    .option('--upstream <url>', 'inference server base URL');
  addUpstreamOptions(rollout)
    .option('--model <name>', "model to serve every call with (default: the upstream's first)")
    .option(
      '--context-window <tokens>',
      "the served model's context length, as every harness is told it (default: the upstream's max_model_len; with neither, the rollout refuses to start)",
      integerArg('--context-window', 1, 100_000_000),
    )
    .option('--samples <n>', 'sessions per task: the GRPO group size', integerArg('--samples', 1, 10_000))
    .option('--concurrency <k>', 'harness sessions at once (RUNNING workers)', integerArg('--concurrency', 1, 1024), 2)
    .option('--init-workers <i>', 'workspaces prepared at once; also the READY buffer of pre-warmed workspaces', integerArg('--init-workers', 1, 1024), 2)
    .option('--post-workers <p>', 'evaluations at once', integerArg('--post-workers', 1, 1024), 2)
    .option('--timeout <seconds>', "the agent's budget, from its start, when its task gives none", secondsArg('--timeout'), 600)
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--out <dir>', 'where workspaces and evaluators work (default: a new temporary folder)')
    .option('--accept <expr>', "mark accepted samples, e.g. 'reward>=1' (offline SFT generation; export --accepted)")
    .option(
      '--reward-key <name>',
      'the metric of a Harbor verifier\'s reward.json that is the reward, when it has several (default: "reward", else its only one)',
      rewardKeyArg,
    )
    .option('--reward-range <lo,hi>', REWARD_RANGE_HELP, rewardRangeArg)
    .option('--resume <rollout>', 'run only the samples of this rollout that did not end (after a crash or Ctrl-C)')
    .option('--keep-workspaces', 'keep each workspace after evaluation (default: removed; --resume also removes those an interrupted run left)')
    .option(
      '--keep-compaction',
      "leave the harness's own compaction and history trimming on (default: off, so each sample is one append-only trace, as NeMo-RL trains it); for a trainer that trains each trace on its own",
    );
  return addSandboxOptions(rollout)
    .option('--command <template>', 'for --harness custom (see polar run --help)')
    .option('--harness-bin <path>', 'the harness executable (default: node_modules/.bin, then PATH)')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--queue <url>', 'enqueue the samples on a shared PostgreSQL queue for `polar worker`s on many machines, instead of running them here')
    .option('--wait', 'with --queue: wait with live progress until every sample has ended, then print the summary')
    .option(
      '--retries <n>',
      'with --queue: times a lost or failed sample is handed to another worker before it is marked interrupted',
      integerArg('--retries', 0, 100),
      2,
    )
    .option(
      '--heartbeat <seconds>',
      'with --queue: a worker that has not touched its sample for this long has lost it (≥ 10)',
      integerArg('--heartbeat', 10, 86_400),
      // A lost sample waits a minute for another worker; a PostgreSQL restart of up to 50 s loses no
      // lease (touched every 10 s: lease.ts BEATS). bench/lease-heartbeat.ts: on the lease thread a
      // touch came at most 0.5 s late on a 2-core machine at load 35, on the main thread 2.7 s.
      60,
    )
    .addOption(environmentOption())
    .option('--json', 'print the summary as JSON');
}

/** Each config field as the flags set it; `undefined` where its flag was not given. */
export type FlagFields = { [K in ConfigField]: (K extends 'upstream' ? Partial<RolloutConfig['upstream']> : RolloutConfig[K]) | undefined };

/** Every field of the config, optional ones included (a map over them must name each). */
type ConfigField = keyof RolloutConfig;

/**
 * The one place a flag becomes a config field. Keys in the order a new rollout stores them: `rollout
 * show --json` prints the stored config, so the order is output.
 */
export function flagFields(opts: RunFlags, sandbox: 'bwrap' | 'none', given: Given): FlagFields {
  const upstream = definedOnly({
    url: opts.upstream,
    // Always filled in by commander: only a typed --upstream-kind may replace a stored kind.
    kind: given('upstreamKind') ? opts.upstreamKind : undefined,
    ...storedUpstreamOptions(opts),
  });
  const ifGiven = <K extends keyof RunFlags>(option: K): RunFlags[K] | undefined => (given(option) ? opts[option] : undefined);
  return {
    harness: opts.harness,
    command: opts.command,
    harnessBin: opts.harnessBin || undefined,
    nodeBin: opts.node || undefined,
    upstream: Object.keys(upstream).length > 0 ? upstream : undefined,
    model: opts.model,
    contextWindow: opts.contextWindow,
    samples: opts.samples,
    // Set by `polar serve` per task (timeout_seconds); `polar rollout` has no flag for it.
    sessionBudgetMs: undefined,
    concurrency: ifGiven('concurrency'),
    initWorkers: ifGiven('initWorkers'),
    postWorkers: ifGiven('postWorkers'),
    timeoutSec: ifGiven('timeout'),
    outDir: opts.out,
    accept: opts.accept,
    keepWorkspaces: opts.keepWorkspaces ? true : undefined,
    // sandboxKind() returns --sandbox when given; absent, a new run fills in what works here.
    sandbox: opts.sandbox ? sandbox : undefined,
    network: opts.network || undefined,
    limits: limitsGiven(opts) ? limitsFrom(opts) : undefined,
    sandboxReadOnly: opts.sandboxRo?.length ? readOnlyFrom(opts) : undefined,
    // The one asked for: a new run stores the engine chosen from it (newArgs), a resume the stored one.
    environment: opts.environment,
    rewardKey: opts.rewardKey,
    rewardRange: opts.rewardRange,
    compaction: opts.keepCompaction ? 'harness' : undefined,
  };
}

/**
 * What `--resume` does with each field's flag: `override` replaces the stored value for the samples
 * left to run; `stored` keeps the rollout's own and ignores the flag, because changing it halfway
 * would change what the group's samples are (or where the interrupted run left its workspaces).
 * The upstream is changed field by field (resume-config.ts refuses a new sampling pair or thinking switch).
 */
export const ON_RESUME: Readonly<Record<ConfigField, 'override' | 'stored'>> = {
  harness: 'stored',
  command: 'stored',
  harnessBin: 'override',
  nodeBin: 'override',
  upstream: 'override',
  model: 'override',
  // The window the harnesses are told is in every first prompt: the samples left keep the group's.
  contextWindow: 'stored',
  samples: 'stored',
  // How many samples run at once changes no sample: more workers on a bigger machine, fewer after an OOM.
  concurrency: 'override',
  initWorkers: 'override',
  postWorkers: 'override',
  timeoutSec: 'stored',
  sessionBudgetMs: 'stored',
  outDir: 'stored',
  accept: 'stored',
  keepWorkspaces: 'override',
  sandbox: 'override',
  network: 'override',
  limits: 'override',
  sandboxReadOnly: 'override',
  environment: 'stored',
  // Which metric is the reward is what the group's rewards mean: the samples that ended scored by it.
  rewardKey: 'stored',
  // The range likewise: a resumed sample scored on another would not be comparable with its group's.
  rewardRange: 'stored',
  // Whether the harness compacts is what a sample's trace is: one chain, or several.
  compaction: 'stored',
};

/** A new rollout's value for each field whose flag was not given (undefined: left out), in stored order. */
function newRunDefaults(opts: RunFlags, sandbox: 'bwrap' | 'none', environment: EnvironmentName): { [K in ConfigField]: RolloutConfig[K] | undefined } {
  return {
    harness: undefined,
    command: undefined,
    harnessBin: undefined,
    nodeBin: undefined,
    upstream: { url: 'none', kind: opts.upstreamKind },
    model: null,
    contextWindow: undefined,
    samples: undefined,
    concurrency: undefined,
    initWorkers: undefined,
    postWorkers: undefined,
    timeoutSec: undefined,
    sessionBudgetMs: undefined,
    outDir: '',
    accept: null,
    keepWorkspaces: false,
    sandbox,
    network: undefined,
    limits: limitsFrom(opts),
    sandboxReadOnly: undefined,
    // `host` is stored as no field at all, as rollouts from before containers have it.
    environment: environment !== 'host' ? environment : undefined,
    rewardKey: undefined,
    // [0, 1] is stored as no field at all, as rollouts from before the flag have it (reward-range.ts).
    rewardRange: undefined,
    // `off` is stored as no field at all, as rollouts from before the switch have it.
    compaction: undefined,
  };
}

/** A new rollout (here, on a queue, or the demo's): its tasks and the config it stores. */
export function newArgs(opts: RunFlags, sandbox: 'bwrap' | 'none'): { tasks: ReturnType<typeof loadTasks>; tasksFile: string; config: RolloutConfig } {
  const builtin = opts.harness !== undefined && isBuiltinAgent(opts.harness);
  const missing = [
    ['--tasks', opts.tasks],
    ['--harness', opts.harness],
    ['--upstream', builtin ? 'none' : opts.upstream],
    ['--samples', opts.samples],
  ]
    .filter(([, v]) => v === undefined)
    .map(([f]) => f);
  if (missing.length > 0) throw new PolarError('POLAR_USAGE', `a new rollout needs ${missing.join(', ')} (or --resume ROLLOUT to continue one)`);
  // A Harbor dataset's invalid tasks are skipped, each said; the rest run.
  const tasks = loadTasks(opts.tasks!, (line) => process.stderr.write(chalk.yellow(`${line}\n`)));
  if (builtin && tasks.some((t) => !t.harbor))
    throw new PolarError('POLAR_USAGE', `--harness ${opts.harness} runs Harbor tasks (folders with solution/ and tests/), not a JSONL task file`);
  const environment = harborEnvironment(
    opts.environment,
    tasks.some((t) => t.harbor),
  );
  if (tasks.some((t) => t.harbor)) {
    // Refused here, before a rollout row exists; its notices are said when the rollout starts. A
    // queued rollout's sandbox is each worker's.
    if (!opts.queue) harborPreflight(tasks, sandbox);
  }
  const defaults = newRunDefaults(opts, sandbox, environment);
  const fields = flagFields(opts, sandbox, ALL_GIVEN);
  // Spread over the defaults, the fields keep the defaults' key order.
  const config = definedOnly({
    ...defaults,
    ...definedOnly(fields),
    upstream: { ...defaults.upstream, ...fields.upstream },
    // The environment chosen (an engine that works here), not the one asked for.
    environment: defaults.environment,
  });
  return { tasks, tasksFile: opts.tasks!, config: config as RolloutConfig };
}

/**
 * A resume runs with the stored configuration; flags given again override it where `ON_RESUME`
 * says so (a moved upstream, more workers, a sandbox path). The upstream changes field by field
 * (resume-config.ts): `--upstream URL` changes the URL only, so a token-in rollout keeps its kind
 * and tokenizer.
 */
export function resumeArgs(opts: RunFlags, sandbox: 'bwrap' | 'none', given: Given): { resume: string; overrides: RolloutOverrides } {
  if (opts.tasks) throw new PolarError('POLAR_USAGE', '--resume continues a rollout with the tasks it stored; drop --tasks');
  const fields = flagFields(opts, sandbox, given);
  const overrides = Object.fromEntries(
    Object.entries(fields).filter(([key, value]) => value !== undefined && ON_RESUME[key as ConfigField] === 'override'),
  ) as RolloutOverrides;
  return { resume: opts.resume!, overrides };
}

/** `--queue`: the checks a queued rollout adds, then the same config as a new run's (its sandbox is each worker's). */
export function queuedArgs(opts: RunFlags): ReturnType<typeof newArgs> & { url: string } {
  const url = opts.queue!;
  if (!isPostgresUrl(url)) throw new PolarError('POLAR_USAGE', `--queue must be a postgres:// URL (got ${JSON.stringify(url)})`);
  if (opts.db && opts.db !== url) throw new PolarError('POLAR_USAGE', "a queued rollout lives in the queue's database: drop --db, or make it the --queue URL");
  if (opts.resume)
    throw new PolarError(
      'POLAR_USAGE',
      'a queued rollout needs no --resume: lost samples go back to the queue by themselves; see `polar rollout status ID --db URL`',
    );
  if (opts.harness && isBuiltinAgent(opts.harness))
    throw new PolarError('POLAR_USAGE', `--harness ${opts.harness} runs here, without a model: drop --queue (or use polar tasks check)`);
  return { ...newArgs(opts, opts.sandbox ?? 'none'), url };
}

/** The upstream flags as stored: a tokenizer folder absolute, so a resume from another folder finds it. */
function storedUpstreamOptions(opts: UpstreamFlags): ReturnType<typeof upstreamOptionsFrom> {
  const options = upstreamOptionsFrom(opts);
  if (options.tokenizer && !options.tokenizer.startsWith('bundled:')) options.tokenizer = path.resolve(options.tokenizer);
  return options;
}

/** The object without its undefined values (an absent field, not a field holding undefined). */
function definedOnly<T extends object>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
