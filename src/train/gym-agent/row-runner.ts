import path from 'node:path';
import { Semaphore } from '../../core/semaphore.js';
import type { SessionKeys } from '../../proxy/session-keys.js';
import type { RolloutConfig } from '../../rollout/config.js';
import { localLedger } from '../../rollout/ledger.js';
import { initStage, postStage, runStage, type StageContext } from '../../rollout/stages.js';
import type { RolloutTask } from '../../rollout/task-file.js';
import type { SandboxSettings } from '../../sandbox/index.js';
import { isPostgresUrl } from '../../store/postgres/url.js';
import type { Store } from '../../store/store.js';
import { classifyFailure, type Failure } from './failures.js';
import { gymRunResult, type GymRunResult } from './result.js';
import type { TaskCatalog } from './task.js';
import { DEFAULT_INFRA_RETRIES, type GymAgentOptions } from './options.js';
import { rowParams, rowSampling } from './rows.js';
import type { SessionCache } from './session-cache.js';

export interface RowOutcome {
  result: GymRunResult;
  failure: Failure | null;
}

export interface RowRunnerDeps {
  options: Pick<GymAgentOptions, 'upstreams' | 'dbPath' | 'infraRetries' | 'onNotice'>;
  store: Store;
  rolloutId: string;
  config: RolloutConfig;
  harness: StageContext['harness'];
  sandbox: SandboxSettings;
  sessionKeys: SessionKeys;
  catalog: TaskCatalog;
  sessions: SessionCache;
}

/**
 * Runs one row as one rollout sample through the rollout stages (workspace, the harness through a
 * capture proxy, evaluation), each stage's pool bounded as `polar rollout`'s are; the policy
 * servers are taken in turn, row by row.
 */
export class RowRunner {
  private next = 0;
  private readonly slots: { init: Semaphore; run: Semaphore; post: Semaphore };

  constructor(private readonly deps: RowRunnerDeps) {
    const { config } = deps;
    this.slots = { init: new Semaphore(config.initWorkers), run: new Semaphore(config.concurrency), post: new Semaphore(config.postWorkers) };
  }

  /** Attempts until the row ends other than by an infrastructure failure, or retries run out. */
  async run(row: Record<string, unknown>, task: RolloutTask): Promise<RowOutcome> {
    const retries = this.deps.options.infraRetries ?? DEFAULT_INFRA_RETRIES;
    for (let attempt = 1; ; attempt++) {
      const { result, failure } = await this.attempt(row, task);
      const out = { result: { ...result, polar_attempts: attempt }, failure };
      if (failure?.kind !== 'infra' || attempt > retries) return out;
      this.deps.options.onNotice?.(`polar gym-agent: task ${task.id}: attempt ${attempt} of ${retries + 1} failed (${failure.reason}); running it again`);
    }
  }

  private async attempt(row: Record<string, unknown>, task: RolloutTask): Promise<RowOutcome> {
    const { options, store, rolloutId } = this.deps;
    const params = rowParams(row);
    const url = options.upstreams[this.next++ % options.upstreams.length]!;
    const p = await this.deps.sessions.get({ url, ...rowSampling(params) });
    const sample = store.rollouts.addSample(rolloutId, { id: task.id, json: JSON.stringify(task) });
    const ctx = this.stageContext(task, { proxyUrl: p.proxy.url, model: p.model, contextWindow: p.contextWindow, proxySocket: p.socket?.path ?? null });
    const prepared = await this.slots.init.run(() => initStage(ctx, sample));
    const ran = prepared ? await this.slots.run.run(() => runStage(ctx, prepared)) : null;
    if (ran) await this.slots.post.run(() => postStage(ctx, ran));
    const ended = store.rollouts.sample(sample.id)!;
    const result = gymRunResult(store, ended, params, p.model);
    return { result, failure: classifyFailure(ended, result.polar_calls) };
  }

  private stageContext(task: RolloutTask, capture: Pick<StageContext, 'proxyUrl' | 'model' | 'contextWindow' | 'proxySocket'>): StageContext {
    const { options, store, rolloutId, config, harness, sandbox, sessionKeys, catalog } = this.deps;
    return {
      rolloutId,
      store,
      dbPath: isPostgresUrl(options.dbPath) ? options.dbPath : path.resolve(options.dbPath),
      ledger: localLedger(store),
      config,
      tasks: new Map([[task.id, task]]),
      harness,
      ...capture,
      sessionKeys,
      accept: null,
      sandbox,
      secrets: [],
      tasksDir: catalog.file ? path.dirname(catalog.file) : null,
      emit: () => {},
      onNotice: (line) => options.onNotice?.(line),
      stopping: () => false,
    };
  }
}
