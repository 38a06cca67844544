import { compactionNotice, countMasked, sampleChain } from './sample-mask.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { defaultOutDir, removeEmptyOutDir } from './out-dir.js';
import { openCapture } from '../capture/open.js';
import { PolarError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import { getHarness } from '../harness/registry.js';
import { privateSocketPath, requireBwrap } from '../sandbox/index.js';
import { sandboxSettings } from './sandboxing.js';
import { DEFAULT_AGENT_HEADERS } from '../proxy/identity.js';
import { SessionKeys } from '../proxy/session-keys.js';
import { SAMPLE_OUTCOMES, type SampleRow } from '../store/rollouts.js';
import { openStore } from '../store/open.js';
import { displayDb, isPostgresUrl } from '../store/postgres/url.js';
import type { Store } from '../store/store.js';
import { parseAccept } from './accept.js';
import { localLedger } from './ledger.js';
import { Channel, pool } from './channel.js';
import type { RolloutConfig, RolloutEvent, RolloutSummary } from './config.js';
import { resumedConfig, type RolloutOverrides } from './resume-config.js';
import { samplingPolicy, type SamplingPolicy } from '../upstream/sampling-policy.js';
import { initStage, postStage, runStage, type Prepared, type Ran, type StageContext } from './stages.js';
import { removeWorkspace, workspaceDir, workspacePaths } from './workspace.js';
import { groupFirstPrompts } from './group-first-prompts.js';
import type { CallTokenRow } from '../store/requests.js';
import type { RolloutTask } from './task-file.js';
import { isBuiltinAgent } from './agents/builtin.js';
import { harborPreflight } from './harbor/trial.js';
import { exitStatusNotices } from './evaluators/tests.js';

export interface RolloutRun {
  dbPath: string;
  /** A new rollout: its tasks and configuration… */
  tasks?: readonly RolloutTask[];
  tasksFile?: string;
  config?: RolloutConfig;
  /** …or one to resume: only its samples that did not end run again. */
  resume?: string;
  /** Overrides for a resume (a new upstream URL, more workers); the stored config is the base. */
  overrides?: RolloutOverrides;
  /** The upstream's API key, from the environment: never stored. */
  upstreamApiKey?: string;
  onEvent?: (event: RolloutEvent) => void;
  onNotice?: (line: string) => void;
  /** Called once the rollout exists (its id is known), before any sample starts. */
  onStart?: (info: { rolloutId: string; samples: SampleRow[]; config: RolloutConfig }) => void;
}

/**
 * A rollout: every task × N samples as GRPO groups, through four stages with their own worker pools
 * so workspace preparation and evaluation overlap other sessions' harness runs:
 * INIT (`initWorkers`: workspace, setup, under their own budget) → READY (a buffer of at most
 * `initWorkers` prepared workspaces) → RUNNING (`concurrency` harnesses through one shared capture
 * proxy, sessions addressed by id) → POSTRUN (`postWorkers`: diff, evaluator, reward, group
 * statistics). Every sample is in the database from the start and ends once; a crash leaves the rest
 * for `resume`.
 */
export async function runRollout(options: RolloutRun): Promise<RolloutSummary> {
  const run = { ...options, dbPath: isPostgresUrl(options.dbPath) ? options.dbPath : path.resolve(options.dbPath) };
  const store = await openStore(run.dbPath, { ...(options.onNotice ? { onNotice: options.onNotice } : {}) });
  const started = Date.now();
  let stopping = false;
  const onSigint = () => {
    stopping = true;
  };
  try {
    // Everything that can refuse the rollout (its Harbor tasks here, an upstream with no model or
    // no known window) runs before it is written: a rollout refused at start leaves no row that
    // `polar rollouts` would list as interrupted and a --resume would only refuse again (issue 40).
    const { rolloutId, config, tasks, tasksFile } = planRollout(store, run);
    for (const line of harborPreflight(tasks, config.sandbox, config.environment)) run.onNotice?.(line);
    for (const line of exitStatusNotices(tasks)) run.onNotice?.(line);
    const { harness, sandbox, socket, upstream, proxy, sessionKeys, model, contextWindow } = isBuiltinAgent(config.harness)
      ? builtinCapture(config)
      : await startCapture(store, config, rolloutId, run.upstreamApiKey);
    try {
      recordRollout(store, run, { rolloutId, config, tasks });
      if (run.resume && !config.keepWorkspaces) {
        const removed = await removeCutShortWorkspaces(config.outDir, store.rollouts.samples(rolloutId));
        if (removed > 0) run.onNotice?.(`removed ${removed} workspace(s) the interrupted run left behind (--keep-workspaces keeps them)`);
      }
      const compaction = compactionNotice(harness, config.compaction);
      if (compaction) run.onNotice?.(compaction);
      process.on('SIGINT', onSigint);
      process.on('SIGTERM', onSigint);
      const ctx: StageContext = {
        rolloutId,
        store,
        ledger: localLedger(store),
        dbPath: run.dbPath,
        config,
        tasks: new Map(tasks.map((t) => [t.id, t])),
        harness,
        proxyUrl: proxy.url,
        sessionKeys,
        model,
        contextWindow,
        accept: config.accept ? parseAccept(config.accept) : null,
        sandbox,
        proxySocket: socket?.path ?? null,
        secrets: run.upstreamApiKey ? [run.upstreamApiKey] : [],
        tasksDir: tasksFile ? path.dirname(path.resolve(tasksFile)) : null,
        emit: (e) => run.onEvent?.(e),
        onNotice: (line) => run.onNotice?.(line),
        stopping: () => stopping,
      };
      const pending = store.rollouts.samples(rolloutId).filter((s) => s.status === 'queued');
      run.onStart?.({ rolloutId, samples: store.rollouts.samples(rolloutId), config });
      await pipeline(ctx, pending, () => stopping);
    } finally {
      await proxy.close(5000);
      await socket?.remove();
      await upstream.close();
    }
    const unfinished = store.rollouts.samples(rolloutId).some((s) => !(SAMPLE_OUTCOMES as readonly string[]).includes(s.status));
    store.rollouts.end(rolloutId, unfinished ? 'interrupted' : 'completed');
    // polar's own temp folder only (a user's --out stays); an interrupted rollout keeps it for the resume.
    if (!unfinished && config.outDir === defaultOutDir(rolloutId)) removeEmptyOutDir(config.outDir);
    // The rate is this process's: samples that ended before a resume took none of its time.
    return { ...summarize(store, rolloutId, displayDb(run.dbPath), Date.now() - started, started), refusedCalls: proxy.refused() };
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
    await store.closeAsync();
  }
}

/** What every rollout process runs its sessions through: the harness, its sandbox, the upstream and one shared capture proxy. */
export async function startCapture(store: Store, config: RolloutConfig, rolloutId: string, apiKey?: string) {
  const harness = getHarness(config.harness, config.command !== undefined ? { command: config.command } : {});
  const sandbox = sandboxSettings(config, requireBwrap(config.sandbox));
  // A master held in this process's memory only: each session's harness gets its own key, and an
  // agent that knows a sibling's session id still cannot write into it.
  const sessionKeys = SessionKeys.random();
  // Made once the model is known; a holder, since the step that makes it is a callback.
  const made: { socket: Awaited<ReturnType<typeof privateSocketPath>> | null } = { socket: null };
  const capture = await openCapture({
    kind: config.upstream.kind,
    upstream: {
      baseUrl: config.upstream.url,
      ...(apiKey ? { apiKey } : {}),
      ...(config.upstream.tokenizer ? { tokenizer: config.upstream.tokenizer } : {}),
      ...(config.upstream.toolParser ? { toolParser: config.upstream.toolParser } : {}),
      ...(config.upstream.temperature !== undefined ? { temperature: config.upstream.temperature } : {}),
      ...(config.upstream.topP !== undefined ? { topP: config.upstream.topP } : {}),
      ...(config.upstream.thinking !== undefined ? { thinking: config.upstream.thinking } : {}),
    },
    model: config.model,
    contextWindow: config.contextWindow ?? null,
    // Every harness polar configures renders its window into the first prompt: known on every
    // machine, or nothing runs. A custom command is never told it (no placeholder names it).
    requireContextWindow: config.harness !== 'custom',
    noModel: `could not learn the served model from ${config.upstream.url}; pass --model NAME`,
    proxy: async () => {
      // Proxy-only sandboxes reach the proxy through this socket (bound into each of them).
      made.socket = sandbox.kind === 'bwrap' ? await privateSocketPath() : null;
      return {
        store,
        defaultSession: `${rolloutId}-unattributed`,
        sessionKeys,
        agentHeaders: [...harness.agentHeaders, ...DEFAULT_AGENT_HEADERS],
        ...(made.socket ? { unixSocket: made.socket.path } : {}),
        // The agent under training must not choose its own sampling (sampling-policy.ts).
        sampling: rolloutSampling(config),
      };
    },
  }).catch(async (err: unknown) => {
    await made.socket?.remove();
    throw err;
  });
  const { upstream, proxy, model, contextWindow } = capture;
  return { harness, sandbox, socket: made.socket, upstream, proxy, sessionKeys, model: model!, contextWindow };
}

/** A rollout's sampling: pinned by polar to the configured pair (NeMo-RL's 1.0 / 1.0 when not given). */
export function rolloutSampling(config: RolloutConfig): SamplingPolicy {
  return samplingPolicy('trainer', config.upstream.kind, config.upstream.temperature, config.upstream.topP, config.upstream.thinking);
}

/** The built-in agents (`oracle`, `nop`) call no model: no upstream, no proxy. */
function builtinCapture(config: RolloutConfig) {
  return {
    harness: null,
    sandbox: sandboxSettings(config, requireBwrap(config.sandbox)),
    socket: null,
    upstream: { close: async () => undefined },
    proxy: { url: '', close: async (_ms?: number) => undefined, refused: () => 0 },
    sessionKeys: SessionKeys.random(),
    model: 'none',
    contextWindow: null,
  };
}

/**
 * On a resume, before anything runs: the workspaces every earlier attempt left (a process killed
 * mid-sample, or between a sample's end and its cleanup, never removed them; a new attempt gets a
 * folder of its own). No other process runs this rollout now. Returns how many were there.
 */
async function removeCutShortWorkspaces(outDir: string, samples: readonly SampleRow[]): Promise<number> {
  let removed = 0;
  for (const s of samples) {
    for (let attempt = 1; attempt <= s.attempt; attempt++) {
      const dir = workspaceDir(outDir, s.taskId, s.sampleIndex, attempt);
      // Killed between removeWorkspace's steps, the workspace can be gone and its baseline copy or logs not.
      if (!workspacePaths(dir).some((d) => existsSync(d))) continue;
      await removeWorkspace(dir);
      removed++;
    }
  }
  return removed;
}

/** The three pools and the channels between them. */
async function pipeline(ctx: StageContext, samples: readonly SampleRow[], stopping: () => boolean): Promise<void> {
  const queued = new Channel<SampleRow>();
  const ready = new Channel<Prepared>(Math.max(1, ctx.config.initWorkers));
  const post = new Channel<Ran>();
  for (const s of samples) await queued.put(s);
  queued.close();
  const init = pool(ctx.config.initWorkers, queued, async (sample) => {
    if (stopping()) return; // never started: stays queued for a resume
    const prepared = await initStage(ctx, sample);
    if (prepared) await ready.put(prepared);
  }).finally(() => ready.close());
  const running = pool(ctx.config.concurrency, ready, async (prepared) => {
    const ran = await runStage(ctx, prepared);
    if (ran) await post.put(ran);
  }).finally(() => post.close());
  const posting = pool(ctx.config.postWorkers, post, (ran) => postStage(ctx, ran));
  await Promise.all([init, running, posting]);
}

/** A new rollout or one to resume, as it will run: its id, configuration and tasks, read and checked; nothing written yet. */
interface PlannedRollout {
  rolloutId: string;
  config: RolloutConfig;
  tasks: RolloutTask[];
  tasksFile: string | null;
}

/** What a new rollout will be, or the stored one a resume takes over (refused when it cannot be resumed). Writes nothing. */
function planRollout(store: Store, run: RolloutRun): PlannedRollout {
  if (run.resume) {
    const row = store.rollouts.get(run.resume);
    if (!row) throw new PolarError('POLAR_USAGE', `no rollout ${JSON.stringify(run.resume)} in this database; list them with \`polar rollouts\``);
    if (row.status === 'completed')
      throw new PolarError('POLAR_USAGE', `rollout ${row.id} already completed every sample; see \`polar rollout show ${row.id}\``);
    if (row.status === 'running') {
      throw new PolarError('POLAR_USAGE', `rollout ${row.id} is still running in another process; resume it once that process has ended`);
    }
    const config = resumedConfig(row.config as unknown as RolloutConfig, run.overrides);
    return { rolloutId: row.id, config, tasks: store.rollouts.tasks(row.id).map((t) => JSON.parse(t) as RolloutTask), tasksFile: row.tasksFile };
  }
  if (!run.tasks || !run.config) throw new PolarError('POLAR_USAGE', 'a rollout needs --tasks FILE (or --resume ID)');
  const rolloutId = newId('rol');
  // Absolute: workspaces, harness runs and git all work from other directories.
  const config: RolloutConfig = { ...run.config, outDir: path.resolve(run.config.outDir || defaultOutDir(rolloutId)) };
  return { rolloutId, config, tasks: [...run.tasks], tasksFile: run.tasksFile ? path.resolve(run.tasksFile) : null };
}

/** Creates the planned rollout with every sample queued (new), or takes it over and re-queues what did not end (resume). */
function recordRollout(store: Store, run: RolloutRun, { rolloutId, config, tasks }: Omit<PlannedRollout, 'tasksFile'>): void {
  if (run.resume) {
    store.rollouts.claim(rolloutId);
    store.rollouts.requeueUnfinished(rolloutId);
    return;
  }
  store.rollouts.create(
    {
      id: rolloutId,
      harness: config.harness,
      upstreamUrl: config.upstream.url,
      upstreamKind: config.upstream.kind,
      servedModel: config.model,
      samplesPerTask: config.samples,
      tasksFile: run.tasksFile ? path.resolve(run.tasksFile) : null,
      accept: config.accept,
      config: config as unknown as Record<string, unknown>,
    },
    tasks.map((t) => ({ id: t.id, json: JSON.stringify(t) })),
  );
}

/**
 * The rollout as it stands in the database: outcomes, groups with their rewards and advantages.
 * `since`: when this run started; the throughput counts only the samples that ended after it
 * (a resume's own), over `durationMs`. Without it, every ended sample counts. `firstPrompts`: check
 * that each group's samples share one first prompt (reads every session's calls; a list of
 * rollouts leaves it out).
 */
export function summarize(
  store: Store,
  rolloutId: string,
  dbPath: string,
  durationMs: number,
  since?: number,
  opts: { firstPrompts?: boolean } = {},
): RolloutSummary {
  const row = store.rollouts.get(rolloutId)!;
  const samples = store.rollouts.samples(rolloutId);
  const groups = store.rollouts.groups(rolloutId);
  const outcomes = { completed: 0, failed: 0, timeout: 0, error: 0, interrupted: 0, unfinished: 0 };
  for (const s of samples) {
    if (s.status in outcomes) outcomes[s.status as keyof typeof outcomes]++;
    else outcomes.unfinished++;
  }
  const rewards = samples.map((s) => s.reward).filter((r): r is number => r !== null);
  const byTask = new Map<string, SampleRow[]>();
  for (const s of samples) byTask.set(s.taskId, [...(byTask.get(s.taskId) ?? []), s]);
  const ended = outcomes.completed + outcomes.failed + outcomes.timeout + outcomes.error;
  const endedHere =
    since === undefined
      ? ended
      : samples.filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status) && s.endedAt !== null && s.endedAt >= since).length;
  const config = row.config as Partial<RolloutConfig>;
  // A queued rollout's samples ran in each worker's own sandbox, not the coordinator's settings:
  // what each had is what its session recorded.
  const queued = typeof row.config.queue === 'object' && row.config.queue !== null;
  const everyHost = config.sandbox === 'none' || config.network === 'host';
  const stored = store.rollouts.tasks(rolloutId).map((t) => JSON.parse(t) as RolloutTask);
  const hostTasks = new Set(stored.filter((t) => t.network === 'host').map((t) => t.id));
  // A Harbor task that forbids the internet kept its harness to the proxy even under --network host.
  const offline = new Set(config.sandbox === 'none' ? [] : stored.filter((t) => t.harbor?.agentNetwork === 'none').map((t) => t.id));
  const checkPrompts = opts.firstPrompts !== false;
  // Each session's calls are read once, for its first prompt and for whether NeMo-RL would mask it.
  const rows = new Map<string, CallTokenRow[]>();
  const rowsOf = (sessionId: string) => {
    let r = rows.get(sessionId);
    if (!r) rows.set(sessionId, (r = store.requests.tokens(sessionId)));
    return r;
  };
  const firstPrompts = new Map(checkPrompts ? [...byTask].map(([taskId, members]) => [taskId, groupFirstPrompts(store, members, rowsOf)]) : []);
  const masked = checkPrompts
    ? countMasked(
        samples
          .filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status))
          .map((sample) => ({ sample, reasons: sampleChain(store, sample, sample.sessionId ? rowsOf(sample.sessionId) : []).reasons })),
      )
    : undefined;
  return {
    rolloutId,
    status: row.status,
    harness: row.harness,
    tasks: byTask.size,
    samplesPerTask: row.samplesPerTask,
    outcomes,
    forfeited: samples.filter((s) => typeof s.evaluator?.forfeit === 'string').length,
    meanReward: rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
    accepted: samples.filter((s) => s.accepted).length,
    attempted: rewards.length,
    groups: [...byTask].map(([taskId, members]) => {
      const g = groups.find((x) => x.taskId === taskId);
      return {
        taskId,
        groupId: members[0]!.groupId,
        rewards: members.map((m) => m.reward),
        outcomes: members.map((m) => m.status),
        mean: g?.mean ?? null,
        std: g?.std ?? null,
        advantages: members.map((m) => m.advantage),
        looAdvantages: members.map((m) => m.looAdvantage),
        accepted: members.filter((m) => m.accepted).length,
        ...(checkPrompts ? { firstPrompt: firstPrompts.get(taskId)! } : {}),
      };
    }),
    durationMs,
    endedHere,
    sessionsPerMinute: durationMs > 0 ? (endedHere / durationMs) * 60_000 : 0,
    db: dbPath,
    outDir: String(row.config.outDir ?? ''),
    hostNetwork: (queued
      ? samples.filter((s) => sessionHadHostNetwork(store, s))
      : samples.filter((s) => (everyHost && !offline.has(s.taskId)) || hostTasks.has(s.taskId))
    ).map((s) => s.id),
    ...(checkPrompts ? { firstPromptSplits: [...firstPrompts].filter(([, c]) => c.status === 'split').map(([t]) => t) } : {}),
    ...(masked ? { masked } : {}),
  };
}

/** Whether a sample's harness had its machine's network, as its session recorded it (run-harness.ts recordSession). */
function sessionHadHostNetwork(store: Store, sample: SampleRow): boolean {
  const session = sample.sessionId ? store.sessions.get(sample.sessionId) : undefined;
  return session?.metadata.network === 'host';
}
