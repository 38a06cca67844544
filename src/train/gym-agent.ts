import { createHash } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { isRecord } from '../core/chat.js';
import { openCapture } from '../capture/open.js';
import { PolarError } from '../core/errors.js';
import { newId } from '../core/ids.js';
import { getHarness } from '../harness/registry.js';
import { privateSocketPath, requireBwrap, type SandboxKind, type SandboxLimits } from '../sandbox/index.js';
import { sandboxSettings } from '../rollout/sandboxing.js';
import { parseJsonBody, readBody } from '../core/http/body.js';
import { HttpGuard, listenGuarded } from '../proxy/http-guard.js';
import { DEFAULT_AGENT_HEADERS } from '../proxy/identity.js';
import type { RunningProxy } from '../proxy/server.js';
import { SessionKeys } from '../proxy/session-keys.js';
import { Semaphore } from '../core/semaphore.js';
import type { RolloutConfig } from '../rollout/config.js';
import { initStage, postStage, runStage, type StageContext } from '../rollout/stages.js';
import type { RolloutTask } from '../rollout/task-file.js';
import { localLedger } from '../rollout/ledger.js';
import { openStore } from '../store/open.js';
import { isPostgresUrl } from '../store/postgres/url.js';
import type { Upstream } from '../upstream/types.js';
import { classifyFailure, FailureWindow, type Failure } from './gym-failures.js';
import { gymRunResult, type GymRunResult } from './gym-result.js';
import { RowRefused, taskForRow, type TaskCatalog } from './gym-task.js';
import { AGENT_NAME } from './gym-wiring.js';
import { parseYaml, type Yaml } from './yaml.js';

export interface GymAgentOptions {
  harness: string;
  command?: string;
  harnessBin?: string;
  nodeBin?: string;
  dbPath: string;
  host: string;
  port: number;
  /** The policy server(s); from NeMo Gym's `policy_base_url` when Gym started this agent. */
  upstreams: string[];
  upstreamKind: string;
  tokenizer?: string;
  model: string | null;
  /** The policy's context length, when the server lists none (NeMo-RL's does not): `polar train grpo` passes max_model_len. */
  contextWindow?: number | null;
  /** Sessions at once (RUNNING); NeMo-RL posts every row of a step at once, the rest wait. */
  concurrency: number;
  timeoutSec: number;
  sandbox: SandboxKind;
  /** The harness's network in the sandbox (default proxy-only; a task may ask for host). */
  network?: 'proxy-only' | 'host';
  limits?: SandboxLimits;
  /** Extra read-only paths in every sandbox (`--sandbox-ro`). */
  sandboxReadOnly?: string[];
  outDir: string;
  /** The tasks `/run` rows may name (`task_id`), from `--tasks FILE`. */
  tasks?: { file: string; tasks: readonly RolloutTask[] };
  /** Rows may define their task inline (`task`); they still run sandboxed. */
  allowInlineTasks?: boolean;
  /** Every request but the readiness probe must present it; required beyond loopback. */
  authToken?: string | null;
  /** Host names besides the bound address and loopback names that callers may use. */
  allowHosts?: readonly string[];
  /** Infrastructure failures (gym-failures.ts) are run again up to this many times before answering (default 2). */
  infraRetries?: number;
  /** Stop NeMo-RL when more than this share of the last `failureWindow` rows failed outside the policy (default 0.5). */
  maxFailedShare?: number;
  /** Rows the share is taken over: about one NeMo-RL step (default 8; `polar train grpo` passes prompts × group size). */
  failureWindow?: number;
  onNotice?: (line: string) => void;
  onRun?: (result: GymRunResult) => void;
}

export const DEFAULT_INFRA_RETRIES = 2;
export const DEFAULT_MAX_FAILED_SHARE = 0.5;
export const DEFAULT_FAILURE_WINDOW = 8;

export interface RunningGymAgent {
  url: string;
  rolloutId: string;
  close(): Promise<void>;
}

/** The agent's own host/port and the policy server Gym told it about (NEMO_GYM_CONFIG_DICT). */
export interface GymEnvironment {
  host: string | null;
  port: number | null;
  policyBaseUrls: string[];
  policyModel: string | null;
}

/**
 * Reads the merged config NeMo Gym gives every server it starts: the instance named by
 * NEMO_GYM_CONFIG_PATH holds this server's host and port (`<name>.responses_api_agents.<impl>`),
 * the top level NeMo-RL's `policy_base_url` (a list, one per vLLM data-parallel worker, each
 * ending in /v1) and `policy_model_name`.
 */
export function gymEnvironment(env: NodeJS.ProcessEnv = process.env): GymEnvironment {
  const dict = env.NEMO_GYM_CONFIG_DICT;
  if (!dict) throw new PolarError('POLAR_USAGE', '--from-gym: NEMO_GYM_CONFIG_DICT is not set; NeMo Gym sets it when it starts an agent server');
  const config = parseYaml(dict);
  const name = env.NEMO_GYM_CONFIG_PATH ?? AGENT_NAME;
  const instance = get(config, name);
  const typed = isMap(instance) ? Object.values(instance)[0] : undefined;
  const impl = isMap(typed) ? Object.values(typed)[0] : undefined;
  const server = isMap(impl) ? impl : {};
  const urls = get(config, 'policy_base_url');
  return {
    host: typeof server.host === 'string' ? server.host : null,
    port: typeof server.port === 'number' ? server.port : null,
    policyBaseUrls: (Array.isArray(urls) ? urls : typeof urls === 'string' ? [urls] : []).filter((u): u is string => typeof u === 'string'),
    policyModel: typeof get(config, 'policy_model_name') === 'string' ? (get(config, 'policy_model_name') as string) : null,
  };
}

/**
 * `polar gym-agent`: NeMo Gym's agent-server contract for NeMo-RL. One `/run` row is one session:
 * its `task` (a rollout task: workspace, setup, evaluator, timeout) goes through the rollout stages
 * (workspace, the harness through polar's capture proxy against the policy server, evaluation),
 * recorded in the database under one rollout per agent process; the answer is gym-result.ts's.
 * Sampling follows the row (NeMo-RL puts the training or validation temperature and top_p in it), so
 * each (server, temperature, top_p, max_output_tokens) gets its own upstream and proxy, the row's
 * output cap on every call. NeMo-RL stops the run on any non-2xx answer, so a sample that failed
 * comes back 200 and masked, after infrastructure failures were run again (gym-failures.ts); only a
 * row polar cannot run at all, or a window of rows that mostly failed outside the policy, is
 * answered 400, to stop a run that would train on nothing.
 */
export async function startGymAgent(options: GymAgentOptions): Promise<RunningGymAgent> {
  if (options.upstreams.length === 0) throw new PolarError('POLAR_USAGE', 'gym-agent needs the policy server: --upstream URL, or --from-gym under NeMo Gym');
  const catalog = taskCatalog(options);
  // Before anything is opened: a server beyond loopback without a token is refused here.
  const guard = new HttpGuard({ host: options.host, token: options.authToken ?? null, allowHosts: options.allowHosts ?? [], what: 'polar gym-agent' });
  const store = await openStore(options.dbPath, { onNotice: (line) => options.onNotice?.(line) });
  const harness = getHarness(options.harness, options.command !== undefined ? { command: options.command } : {});
  const bwrap = requireBwrap(options.sandbox);
  const rolloutId = newId('gym');
  const config: RolloutConfig = {
    harness: options.harness,
    ...(options.command !== undefined ? { command: options.command } : {}),
    ...(options.harnessBin ? { harnessBin: options.harnessBin } : {}),
    ...(options.nodeBin ? { nodeBin: options.nodeBin } : {}),
    upstream: { url: options.upstreams[0]!, kind: options.upstreamKind, ...(options.tokenizer ? { tokenizer: options.tokenizer } : {}) },
    model: options.model,
    samples: 1,
    concurrency: options.concurrency,
    initWorkers: options.concurrency,
    postWorkers: options.concurrency,
    timeoutSec: options.timeoutSec,
    outDir: path.resolve(options.outDir),
    accept: null,
    keepWorkspaces: false,
    sandbox: options.sandbox,
    ...(options.network ? { network: options.network } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.sandboxReadOnly?.length ? { sandboxReadOnly: options.sandboxReadOnly } : {}),
  };
  const sandbox = sandboxSettings(config, bwrap);
  store.rollouts.create(
    {
      id: rolloutId,
      harness: options.harness,
      upstreamUrl: options.upstreams.join(' '),
      upstreamKind: options.upstreamKind,
      servedModel: options.model,
      samplesPerTask: 1,
      tasksFile: null,
      accept: null,
      config: { ...config, source: 'gym-agent' } as unknown as Record<string, unknown>,
    },
    [],
  );
  // One master for every profile's proxy, in this process's memory only (session-keys.ts).
  const sessionKeys = SessionKeys.random();
  const profiles = new Map<
    string,
    Promise<{ upstream: Upstream; proxy: RunningProxy; socket: { path: string; remove(): Promise<void> } | null; model: string; contextWindow: number | null }>
  >();
  // One proxy per (server, sampling, output cap): the row's max_output_tokens caps every call's max_tokens.
  const profile = (url: string, temperature: number | undefined, topP: number | undefined, maxTokens: number | undefined) => {
    const key = `${url}|${temperature ?? ''}|${topP ?? ''}|${maxTokens ?? ''}`;
    let p = profiles.get(key);
    if (!p) {
      p = (async () => {
        // Each profile's proxy has its own socket for proxy-only sandboxes, made once the model is known.
        const made: { socket: { path: string; remove(): Promise<void> } | null } = { socket: null };
        const capture = await openCapture({
          kind: options.upstreamKind,
          upstream: {
            baseUrl: url,
            ...(options.tokenizer ? { tokenizer: options.tokenizer } : {}),
            ...(temperature !== undefined ? { temperature } : {}),
            ...(topP !== undefined ? { topP } : {}),
          },
          model: options.model,
          contextWindow: options.contextWindow ?? null,
          noModel: `no model for ${url}: pass --model (NeMo-RL's server lists none)`,
          proxy: async () => {
            made.socket = sandbox.kind === 'bwrap' ? await privateSocketPath() : null;
            return {
              store,
              maxTokens: maxTokens ?? null,
              defaultSession: `${rolloutId}-unattributed`,
              sessionKeys,
              agentHeaders: [...harness.agentHeaders, ...DEFAULT_AGENT_HEADERS],
              ...(made.socket ? { unixSocket: made.socket.path } : {}),
            };
          },
        });
        return { upstream: capture.upstream, proxy: capture.proxy, socket: made.socket, model: capture.model!, contextWindow: capture.contextWindow };
      })();
      profiles.set(key, p);
    }
    return p;
  };
  const slots = { init: new Semaphore(config.initWorkers), run: new Semaphore(config.concurrency), post: new Semaphore(config.postWorkers) };
  let next = 0;
  const inFlight = new Map<string, Promise<GymAnswer>>();

  const retries = options.infraRetries ?? DEFAULT_INFRA_RETRIES;
  const window = new FailureWindow(options.failureWindow ?? DEFAULT_FAILURE_WINDOW, options.maxFailedShare ?? DEFAULT_MAX_FAILED_SHARE);

  /** One row: attempts until it ends other than by an infrastructure failure, or retries run out. */
  async function run(row: Record<string, unknown>, task: RolloutTask): Promise<{ result: GymRunResult; failure: Failure | null }> {
    for (let attempt = 1; ; attempt++) {
      const { result, failure } = await attemptRow(row, task);
      const out = { result: { ...result, polar_attempts: attempt }, failure };
      if (failure?.kind !== 'infra' || attempt > retries) return out;
      options.onNotice?.(`polar gym-agent: task ${task.id}: attempt ${attempt} of ${retries + 1} failed (${failure.reason}); running it again`);
    }
  }

  async function attemptRow(row: Record<string, unknown>, task: RolloutTask): Promise<{ result: GymRunResult; failure: Failure | null }> {
    const params = isRecord(row.responses_create_params) ? row.responses_create_params : {};
    const url = options.upstreams[next++ % options.upstreams.length]!;
    const cap = num(params.max_output_tokens);
    const p = await profile(url, num(params.temperature), num(params.top_p), cap !== undefined && cap >= 1 ? Math.floor(cap) : undefined);
    const sample = store.rollouts.addSample(rolloutId, { id: task.id, json: JSON.stringify(task) });
    const ctx: StageContext = {
      rolloutId,
      store,
      dbPath: isPostgresUrl(options.dbPath) ? options.dbPath : path.resolve(options.dbPath),
      ledger: localLedger(store),
      config,
      tasks: new Map([[task.id, task]]),
      harness,
      proxyUrl: p.proxy.url,
      sessionKeys,
      model: p.model,
      contextWindow: p.contextWindow,
      accept: null,
      sandbox,
      proxySocket: p.socket?.path ?? null,
      secrets: [],
      tasksDir: catalog.file ? path.dirname(catalog.file) : null,
      emit: () => {},
      onNotice: (line) => options.onNotice?.(line),
      stopping: () => false,
    };
    const prepared = await slots.init.run(() => initStage(ctx, sample));
    const ran = prepared ? await slots.run.run(() => runStage(ctx, prepared)) : null;
    if (ran) await slots.post.run(() => postStage(ctx, ran));
    const ended = store.rollouts.sample(sample.id)!;
    const result = gymRunResult(store, ended, params, p.model);
    return { result, failure: classifyFailure(ended, result.polar_calls) };
  }

  const server = http.createServer({ keepAliveTimeout: 75_000 }, (req, res) => {
    void handle(req, res).catch((err: unknown) => {
      // Never a non-200 for /run (it would stop training): bad rows are answered masked below.
      if (!res.headersSent) send(res, 500, { error: { message: (err as Error).message } });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = (req.url ?? '/').split('?')[0] ?? '/';
    const isPost = req.method === 'POST';
    // Gym's readiness probe (GET /) sends no token; it still must come from this machine's names.
    const refusal = guard.check(req, { token: !(req.method === 'GET' && url === '/'), json: isPost });
    if (refusal) {
      req.resume();
      options.onNotice?.(`polar gym-agent: refused ${req.method} ${url}: ${refusal.message}`);
      send(res, refusal.status, { error: { message: refusal.message, code: refusal.code } });
      return;
    }
    if (req.method === 'GET' && url === '/') {
      req.resume();
      send(res, 200, { status: 'ok', agent: AGENT_NAME, ...(guard.token ? {} : { rollout_id: rolloutId }) });
      return;
    }
    if (isPost && url === '/run') {
      const text = await readBody(req, 64 * 1024 * 1024);
      // Not a row polar runs at all (not JSON, no such task, an inline task not allowed): a
      // misconfiguration, answered 400 so NeMo-RL stops with the reason instead of training on masks.
      const misconfigured = (err: unknown) => {
        options.onNotice?.(`polar gym-agent: refused a /run row: ${(err as Error).message}`);
        send(res, 400, { error: { message: (err as Error).message, code: 'POLAR_BAD_REQUEST' } });
      };
      let row: Record<string, unknown>;
      try {
        const body = parseJsonBody(text);
        if (!isRecord(body)) throw new RowRefused('a /run body is one JSON object (a NeMo Gym row)');
        row = body;
      } catch (err) {
        misconfigured(err);
        return;
      }
      let task: RolloutTask | Error;
      try {
        task = taskForRow(row, catalog);
      } catch (err) {
        if (err instanceof RowRefused) {
          misconfigured(err);
          return;
        }
        // An inline task (--allow-inline-tasks) that does not validate: a row that cannot run, masked.
        task = err as Error;
      }
      if (window.tripped) {
        stopAnswer(res, window.tripped);
        return;
      }
      // A dropped connection makes Gym send the same row again: while the first is running, share it.
      const key = createHash('sha256').update(text).digest('hex');
      let pending = inFlight.get(key);
      if (!pending) {
        const resolved = task;
        pending = (async (): Promise<GymAnswer> => {
          let outcome: { result: GymRunResult; failure: Failure | null };
          try {
            if (resolved instanceof Error) throw resolved;
            outcome = await run(row, resolved);
          } catch (err) {
            const message = (err as Error).message;
            outcome = { result: refused(row, message), failure: { kind: 'config', reason: `the row could not run: ${message}` } };
          }
          options.onRun?.(outcome.result);
          const trip = window.record(outcome.failure);
          if (trip) {
            options.onNotice?.(`polar gym-agent: ${trip}`);
            return { stop: trip };
          }
          return { result: outcome.result };
        })().finally(() => inFlight.delete(key));
        inFlight.set(key, pending);
      }
      const answer = await pending;
      if ('stop' in answer) stopAnswer(res, answer.stop);
      else send(res, 200, answer.result);
      return;
    }
    if (isPost && url === '/aggregate_metrics') {
      const body = parseJsonBody(await readBody(req, 64 * 1024 * 1024));
      const responses = isRecord(body) && Array.isArray(body.verify_responses) ? body.verify_responses.filter(isRecord) : [];
      const rewards = responses.map((r) => r.reward).filter((r): r is number => typeof r === 'number');
      const mean = rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
      send(res, 200, { group_level_metrics: [], agent_metrics: { samples: responses.length, mean_reward: mean }, key_metrics: { mean_reward: mean } });
      return;
    }
    req.resume();
    if (url === '/v1/responses' || url.endsWith('/v1/responses')) {
      send(res, 501, { error: { message: 'polar gym-agent serves /run; its harness talks to the policy through polar, not through /v1/responses' } });
      return;
    }
    send(res, 404, { error: { message: `no route ${req.method} ${url}; polar gym-agent serves GET /, POST /run, POST /aggregate_metrics` } });
  }

  const address = await listenGuarded(server, guard, options.host, options.port);
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    rolloutId,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      for (const p of profiles.values()) {
        const { proxy, upstream, socket } = await p.catch(() => ({ proxy: null, upstream: null, socket: null }));
        await proxy?.close(1000);
        await socket?.remove();
        await upstream?.close();
      }
      store.rollouts.end(rolloutId, 'completed');
      await store.closeAsync();
    },
  };
}

type GymAnswer = { result: GymRunResult } | { stop: string };

/**
 * Too many rows failed outside the policy: a non-2xx /run answer makes NeMo-RL raise (Gym's
 * raise_for_status, rollout_collection.py:1038-1040 at c3bac96; nemo_gym.py:697-710 at 7ea279a
 * prints the body as "EXCEPTION RESULT" and re-raises a 4xx as a data failure, which the GRPO loop
 * does not retry), so the run stops with this message in its log instead of training on nothing.
 */
function stopAnswer(res: ServerResponse, message: string): void {
  send(res, 400, { error: { message: `polar gym-agent: ${message}`, code: 'POLAR_TOO_MANY_FAILURES' } });
}

/** A row polar could not run (not a task, a broken workspace path): a masked placeholder, still 200. */
function refused(row: Record<string, unknown>, reason: string): GymRunResult {
  return {
    responses_create_params: row.responses_create_params ?? { input: [] },
    response: {
      id: `resp_${newId('req')}`,
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      model: 'polar',
      status: 'completed',
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
      output: [
        {
          type: 'message',
          id: 'msg_refused',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: '', annotations: [] }],
          prompt_token_ids: [0],
          generation_token_ids: [0],
          generation_log_probs: [0],
        },
      ],
    },
    reward: 0,
    instance_config: { mask_sample: true },
    polar_mask_reason: `row refused: ${reason}`,
    polar_session_id: null,
    polar_calls: 0,
    polar_subagent_calls: 0,
    polar_side_calls: 0,
    polar_traces: 0,
    polar_masked: 1,
  };
}

/**
 * The tasks rows may name. Without `--tasks` only inline tasks could run, so `--allow-inline-tasks`
 * is then required; inline tasks are the network's code, so they need a sandbox.
 */
function taskCatalog(options: GymAgentOptions): TaskCatalog {
  if (!options.tasks && !options.allowInlineTasks) {
    throw new PolarError('POLAR_USAGE', 'gym-agent needs --tasks FILE: the rollout tasks /run rows name by task_id (polar train grpo passes it)');
  }
  if (options.allowInlineTasks && options.sandbox === 'none') {
    throw new PolarError('POLAR_USAGE', '--allow-inline-tasks runs task definitions that arrive over the network: it needs --sandbox bwrap');
  }
  return {
    tasks: new Map((options.tasks?.tasks ?? []).map((t) => [t.id, t])),
    file: options.tasks ? path.resolve(options.tasks.file) : null,
    allowInline: options.allowInlineTasks === true,
  };
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function send(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function get(config: Yaml, key: string): Yaml | undefined {
  return isMap(config) ? config[key] : undefined;
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Where an agent under Gym works: beside the database's folder, not in Gym's venv. */
export function defaultAgentOutDir(): string {
  return path.join(os.tmpdir(), `polar-gym-agent-${process.pid}`);
}
