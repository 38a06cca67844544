import { describeSampling } from '../../upstream/sampling-policy.js';
import path from 'node:path';
import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { HARNESS_NAMES } from '../../harness/registry.js';
import { sandboxNotices, UNSANDBOXED_GROUPS } from '../../sandbox/index.js';
import { sandboxSettings } from '../../rollout/sandboxing.js';
import { addSandboxOptions, limitsFrom, limitsGiven, readOnlyFrom, sandboxKind, type SandboxFlags } from '../sandbox-options.js';
import type { RolloutConfig, RolloutSummary } from '../../rollout/config.js';
import type { RolloutOverrides } from '../../rollout/resume-config.js';
import { rolloutSampling, runRollout, summarize, type RolloutRun } from '../../rollout/run-rollout.js';
import { loadTasks } from '../../rollout/load-tasks.js';
import { firstPromptNotes } from '../../rollout/first-prompts.js';
import { BUILTIN_AGENTS, harborPreflight, isBuiltinAgent } from '../../rollout/harbor/trial.js';
import { environmentNotice, type HarborEnvironment } from '../../rollout/harbor/environment.js';
import { environmentOption, harborEnvironment } from '../environment-option.js';
import { SAMPLE_OUTCOMES } from '../../store/rollouts.js';
import { defaultDbPath } from '../../store/store.js';
import { displayDb, isPostgresUrl, redactUrl } from '../../store/postgres/url.js';
import { openStore } from '../../store/open.js';
import { sampleLogTail } from '../log-tail.js';
import { integerArg, secondsArg } from '../numbers.js';
import { action, formatTime, invokedAs, printJson, table } from '../output.js';
import { count } from '../plural.js';
import { RolloutProgress } from '../rollout-progress.js';
import { addUpstreamOptions, UPSTREAM_KINDS_HELP, upstreamOptionsFrom, type UpstreamFlags } from '../upstream-options.js';

export interface RolloutOptions extends UpstreamFlags, SandboxFlags {
  tasks?: string;
  harness?: string;
  upstream?: string;
  model?: string;
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
  command?: string;
  harnessBin?: string;
  node?: string;
  json?: boolean;
  environment?: HarborEnvironment;
  queue?: string;
  wait?: boolean;
  retries: number;
  heartbeat: number;
}

export function registerRollout(program: Command): void {
  const rollout = program
    .command('rollout')
    .description('run tasks × N samples through a harness as rewarded GRPO groups (or resume one); `rollout show ID` for its groups')
    .option('--tasks <path>', 'the task file (JSONL; see "Task file" below), or a Harbor task folder or a folder of them')
    .addOption(
      new Option('--harness <name>', 'the harness every session runs; oracle (solution/solve.sh) and nop (nothing) for Harbor tasks, without a model').choices([
        ...HARNESS_NAMES,
        ...BUILTIN_AGENTS,
      ]),
    )
    .option('--upstream <url>', 'inference server base URL');
  addUpstreamOptions(rollout)
    .option('--model <name>', "model to serve every call with (default: the upstream's first)")
    .option('--samples <n>', 'sessions per task: the GRPO group size', integerArg('--samples', 1, 10_000))
    .option('--concurrency <k>', 'harness sessions at once (RUNNING workers)', integerArg('--concurrency', 1, 1024), 2)
    .option('--init-workers <i>', 'workspaces prepared at once; also the READY buffer of pre-warmed workspaces', integerArg('--init-workers', 1, 1024), 2)
    .option('--post-workers <p>', 'evaluations at once', integerArg('--post-workers', 1, 1024), 2)
    .option('--timeout <seconds>', "a session's budget from INIT on, when its task gives none", secondsArg('--timeout'), 600)
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--out <dir>', 'where workspaces and evaluators work (default: a new temporary folder)')
    .option('--accept <expr>', "mark accepted samples, e.g. 'reward>=1' (offline SFT generation; export --accepted)")
    .option('--resume <rollout>', 'run only the samples of this rollout that did not end (after a crash or Ctrl-C)')
    .option('--keep-workspaces', 'keep each workspace after evaluation (default: removed; --resume also removes those an interrupted run left)');
  addSandboxOptions(rollout)
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
      30,
    )
    .addOption(environmentOption())
    .option('--json', 'print the summary as JSON')
    .addHelpText('after', ROLLOUT_HELP + UPSTREAM_KINDS_HELP)
    .action(action(rolloutCommand));
  rollout
    .command('status')
    .description("a rollout's progress: samples per stage and outcome, and per worker (across machines for a queued rollout)")
    .argument('<rollout>', 'rollout id (see `polar rollouts`)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(withParentOptions(rolloutStatus)));
  rollout
    .command('show')
    .description("one rollout's groups: each sample's outcome, reward and advantages")
    .argument('<rollout>', 'rollout id (see `polar rollouts`)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(withParentOptions(showRollout)));
  program
    .command('rollouts')
    .description('list rollouts with their progress, mean reward and accepted samples')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(listRollouts));
}

/**
 * `polar rollout show ID --db X`: commander hands `--db` and `--json` to `rollout` itself, which
 * has them too; the subcommand takes them from there.
 */
function withParentOptions<O extends object>(fn: (id: string, opts: O) => Promise<void>): (id: string, opts: O, cmd: Command) => Promise<void> {
  return (id, opts, cmd) => fn(id, Object.assign(opts, { ...(cmd.optsWithGlobals() as O), ...opts }));
}

/**
 * The exit status when every sample ended `error`. Not 1, which says the rollout did not finish and
 * `--resume` continues it: this one finished, so a resume refuses it, and its samples hold no reward
 * to learn from (an evaluator that crashes or times out, an upstream that never answers). A script
 * tells the two apart by the code; the cause is in `rollout show`'s error column.
 */
export const EXIT_ALL_ERRORED = 3;

const ROLLOUT_HELP = `
Task file: JSONL, one task per line:
  {"id", "prompt", "workspace": {"dir": PATH} | {"git": URL_OR_PATH, "commit": SHA} | {"empty": true},
   "setup": [commands], "evaluator": {"type": "command", "command", "timeout"}
   | {"type": "tests", "fail_to_pass": [...], "pass_to_pass": [...]} | {"type": "session-completed"},
   "timeout": SECONDS, "metadata": {...}, "network": "host", "setup_network": "host" | "none"}
Harbor tasks: --tasks a task folder (instruction.md, task.toml, environment/, tests/, solution/) or
a folder of them. On the host environment the workspace is the Dockerfile's COPY'd files at its
WORKDIR (/app) with /logs beside it; RUN steps and the base image are not reproduced (listed once per
task); tests/ appears at /tests only for the verifier, after the agent; reward.txt / reward.json give
the reward (named rewards kept). --harness oracle / nop run solution/solve.sh / nothing, no model.
--environment docker|podman (the default where \`<engine> info\` works): environment/ is built once per content
(polar-harbor/<task>:<hash>), each sample runs in its own container of it (the harness's Node and
CLI mounted read-only, the proxy through a bridge, --network none unless task.toml allows the
internet, the --max-* caps as the engine's), tests/ copied in after the agent; no diff is recorded.
Sandbox (bwrap, the default where installed): each command sees the system's toolchains read-only,
its workspace and a private home writable, and nothing else (not the task file's folder, the
database, other workspaces or your home). The harness reaches only polar's proxy unless its task
says "network": "host" (or --network host); setup commands get the host network unless
"setup_network": "none"; evaluators get none, and the task file's folder ($POLAR_TASKS_DIR) read-only.
A sample over a cap (--max-procs, --max-memory, --max-file-size, --max-cpu-seconds) ends as error.
Stages: INIT (workspace + setup; the budget starts) → READY → RUNNING (the harness) → POSTRUN
(diff, evaluator, reward).
Exit status: 0 when the rollout completed; 1 when it did not (interrupted: --resume continues it);
${EXIT_ALL_ERRORED} when it completed but every sample ended error (nothing to learn from, and nothing for
--resume to run: fix the cause in \`rollout show ID\`'s error column and start again); 2 for a usage error.
Example:
  polar rollout --tasks fixtures/tasks/tasks.jsonl --harness claude-code --upstream http://gpu:8000 --samples 4
`;

async function rolloutCommand(opts: RolloutOptions, command: Command): Promise<void> {
  if (opts.queue) return queueRollout(opts);
  if (opts.wait) throw new PolarError('POLAR_USAGE', '--wait goes with --queue (a local rollout always waits)');
  const dbPath = opts.db ?? defaultDbPath();
  const sandbox = sandboxKind(opts);
  if (!opts.sandbox && sandbox === 'none' && !opts.json) {
    process.stderr.write(
      chalk.yellow(
        'warning: bubblewrap is not installed or cannot make a sandbox here, so harness and evaluator commands run unsandboxed with full access to this machine (Debian: apt-get install bubblewrap; or pass --sandbox none to say so)\n',
      ),
    );
  }
  const base = opts.resume ? resumeArgs(opts, sandbox, command.getOptionValueSource('upstreamKind') === 'cli') : newArgs(opts, sandbox);
  // Said even with --json (on stderr): the groups are what a rollout of several samples is for.
  if (sandbox === 'none' && 'config' in base && base.config.samples > 1)
    process.stderr.write(
      chalk.yellow(`warning: --sandbox none with --samples ${base.config.samples}: ${UNSANDBOXED_GROUPS}; use --sandbox bwrap for GRPO groups\n`),
    );
  if (!opts.json && 'config' in base) {
    for (const line of sandboxNotices(sandboxSettings(base.config, '')))
      if (opts.sandbox || !line.startsWith('sandbox none')) process.stderr.write(chalk.yellow(`notice: ${line}\n`));
    process.stderr.write(chalk.dim(`notice: ${describeSampling(rolloutSampling(base.config))}\n`));
    const chosen = environmentNotice(opts.environment, base.config.environment ?? 'host');
    if (chosen) process.stderr.write(chalk.yellow(`notice: ${chosen}\n`));
    const host = base.tasks.filter((t) => t.network === 'host').map((t) => t.id);
    if (host.length > 0 && sandbox === 'bwrap' && base.config.network !== 'host') {
      process.stderr.write(
        chalk.yellow(
          `notice: ${host.length} task(s) ask for the host network ("network": "host"): their harness reaches this machine's network, not only the proxy (${host.slice(0, 5).join(', ')}${host.length > 5 ? ', …' : ''})\n`,
        ),
      );
    }
  }
  await executeRollout({ dbPath, ...base }, { json: opts.json === true });
}

/** Runs a rollout with live progress (bars on a TTY, a line per sample otherwise) and prints its summary. */
export async function executeRollout(run: RolloutRun, opts: { json: boolean }, extra: { mock?: MockServerTasks } = {}): Promise<RolloutSummary> {
  let progress: RolloutProgress | null = null;
  const summary = await runRollout({
    ...run,
    ...(process.env.POLAR_UPSTREAM_API_KEY ? { upstreamApiKey: process.env.POLAR_UPSTREAM_API_KEY } : {}),
    onNotice: (line) => process.stderr.write(`${line}\n`),
    onStart: ({ rolloutId, samples }) => {
      if (opts.json) return;
      const done = samples.filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status)).length;
      process.stderr.write(
        `${chalk.bold('polar rollout')} ${rolloutId}: ${samples.length - done} of ${count(samples.length, 'sample')} to run${extra.mock ? ` (mock model: ${extra.mock})` : ''}\n`,
      );
      if (process.stderr.isTTY) progress = new RolloutProgress(samples.length, done);
    },
    onEvent: (e) => {
      if (progress) progress.event(e);
      else if (!opts.json && e.type === 'done') {
        process.stderr.write(
          `  ${e.sampleId} ${e.outcome}${e.reward !== null ? ` reward ${e.reward}` : ''}${e.error ? chalk.dim(` ${e.error.slice(0, 160)}`) : ''}\n`,
        );
      }
    },
  }).finally(() => (progress as RolloutProgress | null)?.stop());
  if (opts.json) printJson(jsonSummary(summary));
  else process.stdout.write(`${summaryText(summary, run.dbPath)}\n`);
  process.exitCode = rolloutExitCode(summary);
  return summary;
}

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

function jsonSummary(s: RolloutSummary): Record<string, unknown> {
  return {
    ok: rolloutExitCode(s) === 0,
    ...s,
    ...(allErrored(s)
      ? { problem: `every sample ended error: no reward to learn from (exit ${EXIT_ALL_ERRORED}); see \`polar rollout show ${s.rolloutId}\`` }
      : {}),
  };
}

/** A description of the mock's scripted solutions, for the demo's first line. */
type MockServerTasks = string;

export function newArgs(
  opts: Omit<RolloutOptions, 'retries' | 'heartbeat'>,
  sandbox: 'bwrap' | 'none',
): { tasks: ReturnType<typeof loadTasks>; tasksFile: string; config: RolloutConfig } {
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
  const tasks = loadTasks(opts.tasks!);
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
  return {
    tasks,
    tasksFile: opts.tasks!,
    config: {
      harness: opts.harness!,
      ...(opts.command !== undefined ? { command: opts.command } : {}),
      ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
      ...(opts.node ? { nodeBin: opts.node } : {}),
      upstream: { url: opts.upstream ?? 'none', kind: opts.upstreamKind, ...storedUpstreamOptions(opts) },
      model: opts.model ?? null,
      samples: opts.samples!,
      concurrency: opts.concurrency,
      initWorkers: opts.initWorkers,
      postWorkers: opts.postWorkers,
      timeoutSec: opts.timeout,
      outDir: opts.out ?? '',
      accept: opts.accept ?? null,
      keepWorkspaces: opts.keepWorkspaces === true,
      sandbox,
      ...(opts.network ? { network: opts.network } : {}),
      limits: limitsFrom(opts),
      ...(opts.sandboxRo?.length ? { sandboxReadOnly: readOnlyFrom(opts) } : {}),
      ...(environment !== 'host' ? { environment } : {}),
    },
  };
}

/**
 * A resume runs with the stored configuration; flags given again override it (a moved upstream, more
 * workers). The upstream changes field by field (resume-config.ts): `--upstream URL` changes the URL
 * only, so a token-in rollout keeps its kind and tokenizer. `kindGiven`: --upstream-kind was on the
 * command line (commander fills in its default otherwise, which must not replace the stored kind).
 */
function resumeArgs(opts: RolloutOptions, sandbox: 'bwrap' | 'none', kindGiven: boolean): { resume: string; overrides: RolloutOverrides } {
  if (opts.tasks) throw new PolarError('POLAR_USAGE', '--resume continues a rollout with the tasks it stored; drop --tasks');
  const overrides: RolloutOverrides = {};
  const upstream: RolloutOverrides['upstream'] = {
    ...(opts.upstream ? { url: opts.upstream } : {}),
    ...(kindGiven ? { kind: opts.upstreamKind } : {}),
    ...storedUpstreamOptions(opts),
  };
  if (Object.keys(upstream).length > 0) overrides.upstream = upstream;
  if (opts.model) overrides.model = opts.model;
  if (opts.sandbox) overrides.sandbox = sandbox;
  if (opts.network) overrides.network = opts.network;
  if (limitsGiven(opts)) overrides.limits = limitsFrom(opts);
  if (opts.sandboxRo?.length) overrides.sandboxReadOnly = readOnlyFrom(opts);
  if (opts.harnessBin) overrides.harnessBin = opts.harnessBin;
  if (opts.node) overrides.nodeBin = opts.node;
  if (opts.keepWorkspaces) overrides.keepWorkspaces = true;
  return { resume: opts.resume!, overrides };
}

/** The upstream flags as stored: a tokenizer folder absolute, so a resume from another folder finds it. */
function storedUpstreamOptions(opts: UpstreamFlags): ReturnType<typeof upstreamOptionsFrom> {
  const options = upstreamOptionsFrom(opts);
  if (options.tokenizer && !options.tokenizer.startsWith('bundled:')) options.tokenizer = path.resolve(options.tokenizer);
  return options;
}

function summaryText(s: RolloutSummary, dbPath: string): string {
  const o = s.outcomes;
  const db = dbPath === defaultDbPath() ? '' : ` --db ${displayDb(dbPath)}`;
  const lines = [
    `${chalk.bold('rollout')} ${s.rolloutId} ${s.status === 'completed' ? chalk.green(s.status) : chalk.yellow(s.status)}: ${s.harness}, ${count(s.tasks, 'task')} × ${count(s.samplesPerTask, 'sample')}`,
    `  outcomes: ${o.completed} completed, ${o.failed} failed, ${o.timeout} timeout, ${o.error} error${o.interrupted + o.unfinished > 0 ? `, ${o.interrupted + o.unfinished} not finished` : ''}`,
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

/** A group's first-prompt check in a few words, for `rollout show`'s group header. */
function firstPromptTag(g: RolloutSummary['groups'][number]): string {
  const c = g.firstPrompt;
  if (!c) return '';
  if (c.status === 'split') return chalk.red.bold(`FIRST PROMPT SPLIT: ${c.distinct} first prompts (by sample: ${c.prompt.map((p) => p ?? '-').join(' ')})`);
  if (c.status === 'same') return chalk.dim(`one first prompt (${c.checked} samples compared)`);
  return chalk.yellow(`first prompts not compared: ${c.unchecked[0]?.reason ?? 'fewer than two samples'}`);
}

function groupTable(s: RolloutSummary): string {
  return table(
    ['TASK', 'REWARDS', 'MEAN', 'STD', 'ADVANTAGES'],
    s.groups.map((g) => [g.taskId, g.rewards.map((r) => fmt(r)).join(' '), fmt(g.mean), fmt(g.std), g.advantages.map((a) => fmt(a, 2)).join(' ')]),
  );
}

function fmt(n: number | null, digits = 3): string {
  return n === null ? '-' : Number.isInteger(n) ? String(n) : n.toFixed(digits);
}

async function showRollout(id: string, opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  const store = await openStore(dbPath, { readonly: true });
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
          return log ? { ...rest, harnessLog: log } : rest;
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
            m.error ? `${m.errorStage}: ${m.error.slice(0, 80)}` : logColumn(logs.get(m.id) ?? null),
          ]),
        )}\n`,
      );
    }
  } finally {
    store.close();
  }
}

/** The error column from a harness log's last words, when the sample has no error of its own. */
function logColumn(log: { tail: string[] } | null): string {
  if (!log) return '';
  const text = log.tail.join(' · ');
  return `harness.log: ${text.length > 120 ? `${text.slice(0, 119)}…` : text}`;
}

async function listRollouts(opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  const store = await openStore(dbPath, { readonly: true });
  try {
    const rows = store.rollouts.list().map((r) => summarize(store, r.id, dbPath, (r.endedAt ?? Date.now()) - r.createdAt, undefined, { firstPrompts: false }));
    if (opts.json) {
      printJson({ ok: true, rollouts: rows.map(({ groups: _g, ...rest }) => rest) });
      return;
    }
    if (rows.length === 0) {
      process.stdout.write('no rollouts yet: start one with `polar rollout --tasks FILE --harness NAME --upstream URL --samples N`\n');
      return;
    }
    const created = new Map(store.rollouts.list().map((r) => [r.id, r.createdAt]));
    process.stdout.write(
      `${table(
        ['ROLLOUT', 'STATUS', 'HARNESS', 'TASKS', 'SAMPLES', 'DONE', 'MEAN REWARD', 'ACCEPTED', 'CREATED'],
        rows.map((r) => [
          r.rolloutId,
          r.status,
          r.harness,
          r.tasks,
          r.tasks * r.samplesPerTask,
          r.outcomes.completed + r.outcomes.failed + r.outcomes.timeout + r.outcomes.error,
          fmt(r.meanReward),
          `${r.accepted}/${r.attempted}`,
          formatTime(created.get(r.rolloutId) ?? null),
        ]),
      )}\n`,
    );
  } finally {
    store.close();
  }
}

/** `--queue`: the rollout goes to the shared store and its samples onto the queue, for workers anywhere. */
async function queueRollout(opts: RolloutOptions): Promise<void> {
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
  const base = newArgs(opts, opts.sandbox ?? 'none');
  const [{ Postgres }, { enqueueRollout }] = await Promise.all([import('../../store/postgres/client.js'), import('../../rollout/queue/enqueue.js')]);
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
 * status); the store itself (its local mirror) is opened once, at the end, for the summary.
 */
async function waitForRollout(url: string, rolloutId: string, harness: string, total: number, started: number, json: boolean): Promise<RolloutSummary> {
  const [{ Postgres }, { interruptAbandoned }, { sampleProgress }] = await Promise.all([
    import('../../store/postgres/client.js'),
    import('../../rollout/queue/enqueue.js'),
    import('../../store/postgres/queue.js'),
  ]);
  const pg = new Postgres(url, { max: 1, applicationName: 'polar-wait' });
  const progress = !json && process.stderr.isTTY ? new RolloutProgress(total, 0) : null;
  const reported = new Set<string>();
  try {
    for (;;) {
      await interruptAbandoned(pg, rolloutId, harness).catch(() => 0);
      const samples = await sampleProgress(pg, rolloutId);
      const ended = samples.filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status) || s.status === 'interrupted');
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
  const store = await openStore(url, { readonly: true });
  try {
    return { ...summarize(store, rolloutId, redactUrl(url), Date.now() - started), db: redactUrl(url) };
  } finally {
    store.close();
  }
}

async function rolloutStatus(id: string, opts: { db?: string; json?: boolean }): Promise<void> {
  const dbPath = opts.db ?? defaultDbPath();
  const store = await openStore(dbPath, { readonly: true });
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
