import type { HarnessName } from '../harness/types.js';
import type { RolloutTask } from '../rollout/task-file.js';
import { laxBool, laxFloat, laxInt, taskRequestProblems } from './contract/polar-models.js';
import { parseHarborEvaluator, parseRuntime, type ServedHarbor, type ServedRuntime } from './runtime.js';

/**
 * A Polar `TaskRequest` (NVIDIA-NeMo/ProRL-Agent-Server src/polar/rollout/models.py:70-94; every
 * field's pin in fixtures/polar-api/contract.json) as polar runs it. Two kinds of no:
 * - 422, as Polar's FastAPI answers a body its models reject (contract.json endpoints.validation_errors):
 *   `{"detail": [{type, loc, msg}]}`, checked by contract/polar-models.ts.
 * - 400, a request Polar's models accept that polar does not run (yet), naming the field and what
 *   to do. Polar itself accepts any name at submit and errors every session at its gateway
 *   (contract.json semantics.builders.names, evaluators.names, harnesses.resolution); a trainer
 *   learns more from a refusal at submit than from a group of ERROR sessions.
 */
export interface ServedTask {
  /** The trainer's own id, used verbatim everywhere (the bridges address their tasks by it, clients.md §6.1). */
  taskId: string;
  /** polar's task: the instruction as the prompt, an empty workspace, the evaluator's polar form. */
  task: RolloutTask;
  harness: HarnessName;
  samples: number;
  /** dispatch_priority: higher starts first among samples not yet started (models.py:76-78). */
  priority: number;
  /** early_stop_min_usable_sessions (null: every session runs to its end). */
  earlyStop: number | null;
  /** timeout_seconds: one budget per session from its INIT start (gateway/node.py:391,1676-1681). */
  budgetMs: number;
  /** builder.strategy as polar's trajectory strategy. */
  strategy: 'per-request' | 'prefix-merging';
  /** evaluator.strategy; null: no evaluator, traces carry reward null (Polar's default). */
  evaluator: 'session_completed' | 'harbor' | null;
  /** The harbor evaluator's settings (with `evaluator: 'harbor'`). */
  harbor: ServedHarbor | null;
  /** The container the sessions run in; null: polar's sandbox with an empty workspace (Polar's gateway default runtime). */
  runtime: ServedRuntime | null;
  callbackUrl: string | null;
  /** The request's metadata, echoed on every result (gateway/node.py:1089; trajectory builders copy group_id, policy_version, rollout_step). */
  metadata: Record<string, unknown>;
  /** What polar accepted and does not apply, said once per task. */
  notices: string[];
}

export interface RequestError {
  status: 400 | 422;
  detail: { type: string; loc: (string | number)[]; msg: string }[];
}

/** Polar's harness names (agent/factory.py:26-40) that are polar harnesses, and which. */
const HARNESSES: Readonly<Record<string, HarnessName>> = {
  claude_code: 'claude-code',
  codex: 'codex',
  gemini_cli: 'gemini-cli',
  qwen_code: 'qwen-code',
  opencode: 'opencode',
  pi: 'pi',
};
const BUILDERS: Readonly<Record<string, ServedTask['strategy']>> = { per_request: 'per-request', prefix_merging: 'prefix-merging' };
/** prefix_merging's own config (prefix_merging.py:79-87): polar merges by the recorded ids and needs neither. */
const MERGING_CONFIG = new Set(['end_of_turn_token_id', 'tokenizer_name_or_path']);
/** Agent settings a preset reads that change nothing polar does (presets/codex.py: the CLI version check, reasoning knobs). */
const IGNORED_SETTINGS = new Set(['version', 'reasoning_effort', 'reasoning_summary']);

/** A JSON object Polar's models already accepted: its fields are read as they are. */
type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const refuse = (loc: (string | number)[], msg: string): RequestError['detail'][number] => ({ type: 'polar_unsupported', loc: ['body', ...loc], msg });

/**
 * The request, checked by Polar's rules first (422) and then by what polar runs (400, every
 * refusal at once). `defaultTimeoutSec`: the agent's own budget when metadata.agent_timeout is absent.
 */
export function parseTaskRequest(body: unknown, defaultTimeoutSec: number): ServedTask | RequestError {
  const problems = taskRequestProblems(body);
  if (problems.length > 0) return { status: 422, detail: problems.map(validationDetail) };
  const r = body as Obj;
  const refusals: RequestError['detail'] = [];
  const notices: string[] = [];
  const harness = agentHarness(obj(r.agent), refusals, notices);
  const strategy = builderStrategy(r.builder == null ? undefined : obj(r.builder), refusals, notices);
  const push = (loc: (string | number)[], msg: string) => refusals.push(refuse(loc, msg));
  const runtime = r.runtime == null ? null : parseRuntime(obj(r.runtime), push, notices);
  const evaluator = evaluatorStrategy(r.evaluator == null ? null : obj(r.evaluator), r.runtime != null, refusals);
  const harbor = evaluator === 'harbor' ? parseHarborEvaluator(obj(r.evaluator), push, notices) : null;
  const samples = laxInt(r.num_samples ?? 1)!;
  const metadata = obj(r.metadata);
  if (metadata.eval_sampling_seed_base !== undefined)
    refusals.push(
      refuse(
        ['metadata', 'eval_sampling_seed_base'],
        "per-sample sampling seeds are not applied: polar pins every call's sampling to serve's --temperature/--top-p (the trainer's); drop the key or serve an eval with its own polar serve",
      ),
    );
  if (r.callback_url != null && !/^https?:\/\//i.test(String(r.callback_url)))
    refusals.push(refuse(['callback_url'], 'an http:// or https:// URL polar can POST the TaskResult to'));
  if (refusals.length > 0 || !harness || !strategy) return { status: 400, detail: refusals };
  const taskId = String(r.task_id);
  const agentTimeout = typeof metadata.agent_timeout === 'number' ? metadata.agent_timeout : null;
  return {
    taskId,
    task: {
      id: taskId,
      prompt: String(r.instruction),
      workspace: { empty: true },
      setup: [],
      evaluator: { type: 'session-completed' },
      timeout: agentTimeout ?? defaultTimeoutSec,
      metadata,
    },
    harness,
    samples,
    priority: laxInt(r.dispatch_priority ?? 0)!,
    earlyStop: r.early_stop_min_usable_sessions == null ? null : laxInt(r.early_stop_min_usable_sessions)!,
    budgetMs: laxFloat(r.timeout_seconds ?? 600)! * 1000,
    strategy,
    evaluator,
    harbor,
    runtime,
    callbackUrl: r.callback_url == null ? null : String(r.callback_url),
    metadata,
    notices,
  };
}

/** `path: msg` (contract/polar-models.ts) as FastAPI's detail entry. */
function validationDetail(problem: string): RequestError['detail'][number] {
  const cut = problem.indexOf(': ');
  const path = cut > 0 ? problem.slice(0, cut) : '';
  const msg = cut > 0 ? problem.slice(cut + 2) : problem;
  const loc = path === '' || path === '(model)' ? ['body'] : ['body', ...path.split('.').map((k) => (/^\d+$/.test(k) ? Number(k) : k))];
  return { type: 'value_error', loc, msg };
}

function agentHarness(agent: Obj, refusals: RequestError['detail'], notices: string[]): HarnessName | null {
  if (agent.import_path != null) {
    refusals.push(refuse(['agent', 'import_path'], "a Python harness class cannot run in polar; name one of polar's harnesses in agent.harness"));
    return null;
  }
  const name = String(agent.harness);
  const harness = HARNESSES[name];
  if (!harness) {
    refusals.push(refuse(['agent', 'harness'], `polar runs ${Object.keys(HARNESSES).join(', ')}; ${JSON.stringify(name)} is not one of them`));
    return null;
  }
  if (list(agent.mcp_servers).length > 0) refusals.push(refuse(['agent', 'mcp_servers'], 'MCP servers are not given to harnesses yet'));
  if (agent.skills_path != null) refusals.push(refuse(['agent', 'skills_path'], 'skills are not copied into the agent yet'));
  if (Object.keys(obj(agent.env)).length > 0)
    refusals.push(refuse(['agent', 'env'], "the harness's environment is polar's own (its private config, the proxy's key): extra variables are not set"));
  for (const key of Object.keys(obj(agent.settings))) {
    if (IGNORED_SETTINGS.has(key)) notices.push(`agent.settings.${key} is ignored: polar runs the harness version it has installed, with its own settings`);
    else
      refusals.push(
        refuse(
          ['agent', 'settings', key],
          key === 'model_kwargs' || key === 'sampling_seed'
            ? "sampling is pinned by polar serve (--temperature/--top-p, the trainer's), not by a request"
            : `polar does not apply agent setting ${JSON.stringify(key)}`,
        ),
      );
  }
  if (agent.model_name != null)
    notices.push(`agent.model_name ${JSON.stringify(agent.model_name)} is not used: the harness is told the upstream's model, which serves every call`);
  return harness;
}

function builderStrategy(builder: Obj | undefined, refusals: RequestError['detail'], notices: string[]): ServedTask['strategy'] | null {
  const name = String(builder?.strategy ?? 'per_request');
  const strategy = BUILDERS[name];
  if (!strategy) {
    refusals.push(refuse(['builder', 'strategy'], `polar builds per_request or prefix_merging traces; ${JSON.stringify(name)} is not one of them`));
    return null;
  }
  for (const key of Object.keys(obj(builder?.config))) {
    if (strategy === 'prefix-merging' && MERGING_CONFIG.has(key))
      notices.push(`builder.config.${key} is not needed: polar merges by the ids the server returned`);
    else refusals.push(refuse(['builder', 'config', key], `polar's ${name} takes no setting ${JSON.stringify(key)}`));
  }
  return strategy;
}

function evaluatorStrategy(evaluator: Obj | null | undefined, hasRuntime: boolean, refusals: RequestError['detail']): ServedTask['evaluator'] {
  if (evaluator == null) return null;
  const name = String(evaluator.strategy);
  if (name === 'harbor') {
    if (!hasRuntime) refusals.push(refuse(['evaluator', 'strategy'], "harbor grades inside the session's container: give the task a runtime (its image)"));
    return 'harbor';
  }
  if (name !== 'session_completed') {
    refusals.push(
      refuse(
        ['evaluator', 'strategy'],
        name === 'test_on_output'
          ? "test_on_output grades the PASSED/FAILED lines a test command prints in the agent's repository, which the agent can print itself; polar grades named tests by the runner's own report: a task file's `tests` evaluator with `runner`, run by polar rollout"
          : `polar serve scores with session_completed, or harbor with a runtime; ${JSON.stringify(name)} is not run here`,
      ),
    );
    return null;
  }
  if (Object.keys(obj(evaluator.config)).length > 0) refusals.push(refuse(['evaluator', 'config'], 'session_completed takes no config'));
  if (Object.keys(obj(evaluator.env)).length > 0) refusals.push(refuse(['evaluator', 'env'], 'session_completed runs no command to give variables to'));
  if (laxBool(evaluator.refresh_runtime ?? false)) refusals.push(refuse(['evaluator', 'refresh_runtime'], 'session_completed reads no runtime'));
  return 'session_completed';
}
