/**
 * NVIDIA Polar's validation of its rollout API's bodies, written from its pydantic models
 * (NVIDIA-NeMo/ProRL-Agent-Server; pins and cites in fixtures/polar-api/contract.json):
 * `src/polar/rollout/models.py` and `src/polar/trajectory/models.py` at bac80ae4,
 * `src/polar/runtime/models.py` at 467f2ab2, `src/polar/agent/models.py` as the public release
 * (c04b8146) has it. Cites below are `path:line` in those files. Returns every problem found, as
 * `path: what`; an empty list means Polar's models would accept the document in pydantic's default
 * (lax) mode, which is how FastAPI validates a JSON body: an int field takes true/false, 2.0 and
 * "2"; a float field takes numeric strings. Unknown keys are ignored except where a model forbids
 * them (SessionTiming). Pydantic skips a model validator when a field already failed; this file
 * reports both. `scripts/check-polar-models.py` runs Polar's real models for comparison.
 */

type Json = Record<string, unknown>;
type Report = (path: string, what: string) => void;
type Check = (value: unknown, path: string, p: Report) => void;
interface Field {
  check: Check;
  required?: boolean;
}

export interface PolarCheckOptions {
  /** Also hold to what Polar's own server emits (manager.py, pipeline.py, node.py), not only what its models accept. */
  polarEmits?: boolean;
  /** Also reject SessionTiming keys beyond the four of the public release (c04b8146 models.py SessionTiming, extra="forbid"). */
  publicRelease?: boolean;
}

/** SessionStatus (rollout/models.py:23-47), a StrEnum: SessionResult.status takes any of these. */
export const SESSION_STATUSES = [
  'REGISTERED',
  'INITIALIZING',
  'READY',
  'RUNNING',
  'POST_RUN',
  'BUILDING',
  'EVALUATING',
  'COMPLETED',
  'ERROR',
  'TIMEOUT',
] as const;
/** SessionStatus.terminal() (rollout/models.py:41-43). */
export const TERMINAL_SESSION_STATUSES = ['COMPLETED', 'ERROR', 'TIMEOUT'] as const;
/** Trajectory._validate_status (trajectory/models.py:213-219). */
export const TRAJECTORY_STATUSES = ['COMPLETED', 'TIMEOUT', 'ERROR'] as const;
/** TaskStatus.status is a bare str (rollout/models.py:214); these are the values RolloutManager writes (manager.py:171,210,219,256,262,275,394,401). */
export const TASK_STATUSES = ['running', 'completed', 'failed', 'cancelling', 'cancelled'] as const;
/** Registry names (trajectory/registry.py:68-70, 87-92); a "module:Class" strategy is imported instead (registry.py:48). */
export const POLAR_BUILDERS = ['per_request', 'prefix_merging', 'router_policy'] as const;
export const POLAR_EVALUATORS = ['session_completed', 'swebench_harness', 'test_on_output', 'harbor', 'harbor_rubric', 'spilot_harbor'] as const;
/** agent/factory.py:26-40 (agent.import_path loads any BaseHarness instead). */
export const POLAR_HARNESSES = [
  'claude_code',
  'codex',
  'gemini_cli',
  'hermes',
  'mini_swe_agent',
  'openclaw',
  'openhands_sdk',
  'opencode',
  'pi',
  'qwen_code',
  'shell',
  'spilot_router',
  'vanillux2',
] as const;

/** SessionTiming (rollout/models.py:133-185), model_config extra="forbid" (line 143). */
const TIMING_FLOATS = [
  'register_to_init_queue_ms',
  'rollout_dispatch_ms',
  'rollout_result_wait_ms',
  'rollout_pipeline_e2e_ms',
  'init_ms',
  'ready_queue_ms',
  'run_ms',
  'postrun_queue_ms',
  'postrun_ms',
  'container_start_ms',
  'eval_container_start_ms',
  'runtime_validation_ms',
  'eval_runtime_validation_ms',
  'prepare_ms',
  'eval_prepare_ms',
  'agent_setup_ms',
  'agent_exec_ms',
  'agent_postprocess_ms',
  'build_ms',
  'eval_ms',
  'postrun_exec_ms',
  'runtime_stop_ms',
  'e2e_ms',
  'runtime_exec_ms',
  'mini_swe_command_ms',
];
const TIMING_INTS = [
  'runtime_exec_count',
  'runtime_exec_timeout_count',
  'runtime_exec_failure_count',
  'runtime_exec_exception_count',
  'runtime_exec_cancelled_count',
  'mini_swe_command_count',
  'mini_swe_command_timeout_count',
  'mini_swe_command_failure_count',
];
const TIMING_FLOAT_MAPS = ['runtime_exec_ms_by_category', 'mini_swe_command_ms_by_category'];
const TIMING_INT_MAPS = ['runtime_exec_count_by_category', 'mini_swe_command_count_by_category'];
export const SESSION_TIMING_KEYS = [...TIMING_FLOATS, ...TIMING_INTS, ...TIMING_FLOAT_MAPS, ...TIMING_INT_MAPS];
export const PUBLIC_SESSION_TIMING_KEYS = ['register_to_init_queue_ms', 'init_ms', 'run_ms', 'postrun_ms'];

// ---------------------------------------------------------------------------------------------
// The models that cross the wire
// ---------------------------------------------------------------------------------------------

/** POST /rollout/task/submit body: TaskRequest (rollout/models.py:70-94). */
export function taskRequestProblems(x: unknown): string[] {
  return collect((p) => taskRequest(x, '', p));
}

/** GET/DELETE /rollout/task/{id} answer: TaskStatus (rollout/models.py:210-218). */
export function taskStatusProblems(x: unknown, options: PolarCheckOptions = {}): string[] {
  return collect((p) => {
    const o = model(x, '', p, {
      task_id: { check: str, required: true },
      status: { check: str, required: true },
      total_sessions: { check: int(), required: true },
      completed_sessions: { check: int(), required: true },
      results: { check: listOf(sessionResultCheck(options)) },
      result_paths: { check: listOf(str) },
    });
    if (o && options.polarEmits) {
      if (typeof o.status === 'string' && !(TASK_STATUSES as readonly string[]).includes(o.status))
        p('status', `Polar writes only ${TASK_STATUSES.join(' | ')} (manager.py)`);
      const total = laxInt(o.total_sessions);
      const done = laxInt(o.completed_sessions);
      if (total !== undefined && done !== undefined && done > total) p('completed_sessions', 'exceeds total_sessions');
    }
  });
}

/** The callback body: TaskResult (rollout/models.py:201-207); `results` has no default. */
export function taskResultProblems(x: unknown, options: PolarCheckOptions = {}): string[] {
  return collect((p) => {
    const o = model(x, '', p, {
      task_id: { check: str, required: true },
      status: { check: str, required: true },
      results: { check: listOf(sessionResultCheck(options)), required: true },
      result_paths: { check: listOf(str) },
    });
    // RolloutManager builds a TaskResult only for a finished batch (manager.py:407-412) and posts it only then (manager.py:231-232).
    if (o && options.polarEmits && o.status !== 'completed') p('status', "Polar posts only status 'completed' (manager.py:409)");
  });
}

/** SessionResult (rollout/models.py:188-198). */
export function sessionResultProblems(x: unknown, options: PolarCheckOptions = {}): string[] {
  return collect((p) => sessionResultCheck(options)(x, '', p));
}

/** Trajectory (trajectory/models.py:205-219). */
export function trajectoryProblems(x: unknown): string[] {
  return collect((p) => trajectory(x, '', p));
}

/** Trace (trajectory/models.py:125-169). */
export function traceProblems(x: unknown): string[] {
  return collect((p) => trace(x, '', p));
}

// ---------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------

function taskRequest(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    task_id: { check: str, required: true },
    instruction: { check: str, required: true },
    num_samples: { check: int({ ge: 1 }) },
    dispatch_priority: { check: int({ ge: 0, le: 100 }) },
    early_stop_min_usable_sessions: { check: nullable(int({ ge: 1 })) },
    timeout_seconds: { check: float({ gt: 0 }) },
    runtime: { check: nullable(runtimeSpec) },
    agent: { check: agentSpec, required: true },
    builder: { check: strategySpec },
    evaluator: { check: nullable(evaluatorSpec) },
    callback_url: { check: nullable(str) },
    metadata: { check: dict },
  });
  if (!o) return;
  // _validate_early_stop_threshold (rollout/models.py:88-94).
  const threshold = o.early_stop_min_usable_sessions === undefined ? null : laxInt(o.early_stop_min_usable_sessions);
  const samples = o.num_samples === undefined ? 1 : laxInt(o.num_samples);
  if (threshold != null && samples !== undefined && threshold > samples)
    p(at(path, 'early_stop_min_usable_sessions'), 'early_stop_min_usable_sessions cannot exceed num_samples');
  // _validate_agent_timeout_metadata (rollout/models.py:60-67): the raw value, no coercion.
  if (isObj(o.metadata)) {
    const value = o.metadata.agent_timeout;
    if (value !== undefined && value !== null && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0))
      p(at(path, 'metadata.agent_timeout'), 'metadata.agent_timeout must be a positive finite number');
  }
}

/** RuntimeSpec (runtime/models.py:104-161). */
function runtimeSpec(x: unknown, path: string, p: Report): void {
  model(x, path, p, {
    backend: { check: oneOf(['docker', 'apptainer']) },
    image: { check: nonBlank('runtime image must be non-empty'), required: true }, // :133-139
    prepare: { check: listOf(prepareAction) },
    eval_prepare: { check: nullable(listOf(prepareAction)) },
    env: { check: dictOf(str) },
    network: { check: nullable(str) },
    workdir: { check: nullable(nonBlank('workdir must be non-empty when provided')) }, // :141-149
    direct_exec_init_command: { check: nullable(nonBlank('direct_exec_init_command must be non-empty when provided')) }, // :151-161
    cpus: { check: nullable(int()) },
    memory_mb: { check: nullable(int()) },
    storage_mb: { check: nullable(int()) },
    gpus: { check: int() },
    allow_internet: { check: bool },
    internet_volumes: { check: listOf(str) },
    import_path: { check: nullable(str) },
    kwargs: { check: dict },
  });
}

/** PrepareAction (runtime/models.py:60-93). */
function prepareAction(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    type: { check: oneOf(['upload_file', 'upload_dir', 'exec']), required: true },
    source: { check: nullable(str) },
    target: { check: nullable(str) },
    command: { check: nullable(str) },
    cwd: { check: nullable(str) },
    env: { check: nullable(dictOf(str)) },
    max_attempts: { check: int({ ge: 1, le: 10 }) },
    retry_backoff_seconds: { check: float({ ge: 0, le: 60 }) },
  });
  if (!o) return;
  // _validate_fields (runtime/models.py:75-93).
  const set = (k: string) => o[k] !== undefined && o[k] !== null;
  if (o.type === 'upload_file' || o.type === 'upload_dir') {
    if (!o.source || !o.target) p(path, `${o.type} requires source and target`);
    for (const k of ['command', 'cwd', 'env']) if (set(k)) p(at(path, k), `${o.type} must not set ${k}`);
    const attempts = o.max_attempts === undefined ? 1 : laxInt(o.max_attempts);
    const backoff = o.retry_backoff_seconds === undefined ? 0 : laxFloat(o.retry_backoff_seconds);
    if (attempts !== 1 || backoff !== 0) p(path, `${o.type} does not support exec retry settings`);
  } else if (o.type === 'exec') {
    if (!o.command) p(at(path, 'command'), 'exec requires command');
    for (const k of ['source', 'target']) if (set(k)) p(at(path, k), `exec must not set ${k}`);
  }
}

/** ExecInput (runtime/models.py:10-57, the 467f2ab2 version with protected_argv). */
function execInput(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    command: { check: nullable(str) },
    protected_argv: { check: nullable(listOf(str)) },
    protected_env_keys: { check: listOf(str) },
    protected_file_digests: { check: dictOf(str) },
    cwd: { check: nullable(str) },
    env: { check: nullable(dictOf(str)) },
  });
  if (!o) return;
  // _validate_execution_mode (runtime/models.py:24-57).
  const argv = Array.isArray(o.protected_argv) ? o.protected_argv : null;
  const keys = Array.isArray(o.protected_env_keys) ? o.protected_env_keys : [];
  const digests = isObj(o.protected_file_digests) ? o.protected_file_digests : {};
  const hasCommand = typeof o.command === 'string' && o.command !== '';
  const hasProtected = argv !== null && argv.length > 0;
  if (hasCommand === hasProtected) p(path, 'ExecInput requires exactly one command or protected_argv');
  if ((keys.length > 0 || Object.keys(digests).length > 0) && !hasProtected) p(path, 'protected metadata requires protected_argv');
  if (argv === null) return;
  const first = argv[0];
  if (typeof first !== 'string' || !first.startsWith('/')) p(at(path, 'protected_argv'), 'protected_argv requires an absolute executable');
  if (argv.some((a) => typeof a !== 'string' || a === '' || a.includes('\0')))
    p(at(path, 'protected_argv'), 'protected_argv entries must be non-empty and NUL-free');
  if (new Set(keys).size !== keys.length) p(at(path, 'protected_env_keys'), 'protected_env_keys must be unique');
  for (const k of keys)
    if (typeof k !== 'string' || !/^[A-Za-z0-9_]+$/.test(k) || k.toUpperCase() !== k)
      p(at(path, 'protected_env_keys'), 'protected_env_keys must be uppercase environment names');
  if (argv.length !== 2) p(at(path, 'protected_argv'), 'protected_argv requires an exact executable and runner path');
  const runner = argv[1];
  if (typeof runner !== 'string' || !Object.hasOwn(digests, runner)) p(at(path, 'protected_file_digests'), 'protected runner path requires a pinned digest');
  for (const [file, digest] of Object.entries(digests)) {
    if (!file.startsWith('/') || file.includes('\0')) p(at(path, 'protected_file_digests'), 'protected file paths must be absolute and NUL-free');
    // Python's int(digest, 16) after a length-64 check; a 0x prefix or underscores would also pass there.
    if (typeof digest !== 'string' || digest.length !== 64 || !/^[0-9a-fA-F]+$/.test(digest))
      p(at(path, 'protected_file_digests'), 'protected file digests must be SHA-256 hex strings');
  }
}

/** MCPServerSpec (agent/models.py:12-29). */
function mcpServer(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    name: { check: str, required: true },
    transport: { check: oneOf(['stdio', 'sse', 'streamable-http']), required: true },
    command: { check: nullable(str) },
    args: { check: listOf(str) },
    url: { check: nullable(str) },
  });
  if (!o) return;
  if (o.transport === 'stdio' && !o.command) p(path, 'stdio transport requires command');
  if ((o.transport === 'sse' || o.transport === 'streamable-http') && !o.url) p(path, `${o.transport} transport requires url`);
}

/** AgentSpec (agent/models.py:32-66). */
function agentSpec(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    harness: { check: nullable(str) },
    import_path: { check: nullable(str) },
    model_name: { check: nullable(str) },
    settings: { check: dict },
    env: { check: dictOf(str) },
    mcp_servers: { check: listOf(mcpServer) },
    skills_path: { check: nullable(str) },
    custom_shell: { check: nullable(execInput) },
  });
  if (!o) return;
  // _validate_agent_source (agent/models.py:44-66).
  const given = (k: string) => o[k] !== undefined && o[k] !== null;
  if (Number(given('harness')) + Number(given('import_path')) !== 1) p(path, 'exactly one of harness or import_path must be provided');
  if (given('custom_shell')) {
    if (o.harness !== 'shell') p(at(path, 'custom_shell'), "custom_shell is only valid when agent.harness is 'shell'");
    if (Array.isArray(o.mcp_servers) && o.mcp_servers.length > 0) p(at(path, 'mcp_servers'), 'mcp_servers must be omitted when custom_shell is used');
    if (given('skills_path')) p(at(path, 'skills_path'), 'skills_path must be omitted when custom_shell is used');
  } else if (o.harness === 'shell') {
    p(at(path, 'custom_shell'), "agent.harness='shell' requires custom_shell");
  }
}

/** StrategySpec (trajectory/models.py:16-20): no check of the name; an unknown one fails at the gateway (registry.py:45-52). */
function strategySpec(x: unknown, path: string, p: Report): void {
  model(x, path, p, { strategy: { check: str, required: true }, config: { check: dict } });
}

/** EvaluatorSpec (trajectory/models.py:23-29). */
function evaluatorSpec(x: unknown, path: string, p: Report): void {
  model(x, path, p, {
    strategy: { check: str, required: true },
    config: { check: dict },
    env: { check: dictOf(str) },
    refresh_runtime: { check: bool },
  });
}

function sessionResultCheck(options: PolarCheckOptions): Check {
  return (x, path, p) => {
    const o = model(x, path, p, {
      session_id: { check: str, required: true },
      task_id: { check: str, required: true },
      status: { check: oneOf(SESSION_STATUSES), required: true },
      trajectory: { check: trajectory, required: true },
      timing: { check: sessionTiming(options) },
      node_id: { check: nullable(str) },
      error: { check: nullable(str) },
      metadata: { check: dict },
    });
    if (!o || !options.polarEmits) return;
    // Terminal results only, with the trajectory's status (node.py:1079-1089, 1463-1512; pipeline.py:753-812).
    if (typeof o.status === 'string' && !(TERMINAL_SESSION_STATUSES as readonly string[]).includes(o.status))
      p(at(path, 'status'), 'Polar returns only COMPLETED | ERROR | TIMEOUT');
    const traj = isObj(o.trajectory) ? o.trajectory : null;
    if (traj && traj.status !== o.status) p(at(path, 'status'), 'differs from trajectory.status (Polar copies one into the other)');
    // _mask_noncompleted_trajectory (node.py:1232-1309): reward 0.0, loss_mask zeroed unless an aligned agent timeout stays trainable.
    if (traj && traj.status !== 'COMPLETED' && Array.isArray(traj.traces))
      traj.traces.forEach((t, i) => {
        if (!isObj(t)) return;
        const where = at(at(path, 'trajectory.traces'), i);
        if (t.reward !== 0 && t.reward !== undefined) p(at(where, 'reward'), 'a non-COMPLETED trajectory carries reward 0.0 (node.py:1275-1278)');
        const filter = isObj(t.metadata) && isObj(t.metadata.training_filter) ? t.metadata.training_filter : null;
        if (filter?.trainable !== true && Array.isArray(t.loss_mask) && t.loss_mask.some((m) => m !== 0))
          p(at(where, 'loss_mask'), 'a non-COMPLETED trajectory is fully masked unless training_filter.trainable (node.py:1279-1280)');
      });
  };
}

function sessionTiming(options: PolarCheckOptions): Check {
  return (x, path, p) => {
    const spec: Record<string, Field> = {};
    for (const k of TIMING_FLOATS) spec[k] = { check: float() };
    for (const k of TIMING_INTS) spec[k] = { check: int() };
    for (const k of TIMING_FLOAT_MAPS) spec[k] = { check: dictOf(float()) };
    for (const k of TIMING_INT_MAPS) spec[k] = { check: dictOf(int()) };
    const o = model(x, path, p, spec, 'forbid');
    if (o && options.publicRelease)
      for (const k of Object.keys(o)) if (k in spec && !PUBLIC_SESSION_TIMING_KEYS.includes(k)) p(at(path, k), 'extra key (the public release forbids it)');
  };
}

function trajectory(x: unknown, path: string, p: Report): void {
  model(x, path, p, {
    status: { check: oneOf(TRAJECTORY_STATUSES), required: true },
    metadata: { check: dict },
    traces: { check: listOf(trace) },
    error: { check: nullable(str) },
  });
}

function trace(x: unknown, path: string, p: Report): void {
  const o = model(x, path, p, {
    prompt_ids: { check: listOf(int()) },
    response_ids: { check: listOf(int()) },
    loss_mask: { check: listOf(lossMaskValue) },
    prompt_messages: { check: listOf(dict) },
    response_messages: { check: listOf(dict) },
    tools: { check: nullable(listOf(dict)) },
    finish_reason: { check: nullable(str) },
    response_logprobs: { check: nullable(listOf(float())) },
    reward: { check: reward },
    reward_components: { check: rewardComponents },
    metadata: { check: dict },
  });
  if (!o) return;
  // _validate_response_lengths (trajectory/models.py:161-169): an empty loss_mask is not length-checked.
  const response = Array.isArray(o.response_ids) ? o.response_ids.length : 0;
  if (Array.isArray(o.loss_mask) && o.loss_mask.length > 0 && o.loss_mask.length !== response)
    p(at(path, 'loss_mask'), 'loss_mask length must match response_ids length');
  if (Array.isArray(o.response_logprobs) && o.response_logprobs.length !== response)
    p(at(path, 'response_logprobs'), 'response_logprobs length must match response_ids length');
}

/** loss_mask items: list[int], then _validate_loss_mask_values (trajectory/models.py:150-159). */
function lossMaskValue(v: unknown, path: string, p: Report): void {
  const n = laxInt(v);
  if (n === undefined) p(path, 'must be an integer');
  else if (n !== 0 && n !== 1) p(path, 'loss_mask values must be 0 or 1');
}

/** Trace.reward: _finite_reward_or_none before validation (trajectory/models.py:140-143, 172-183). */
function reward(v: unknown, path: string, p: Report): void {
  const what = finiteRewardProblem(v);
  if (what) p(path, what);
}

/** Trace.reward_components: _finite_reward_components_or_none (trajectory/models.py:145-148, 186-202); null becomes {}. */
function rewardComponents(v: unknown, path: string, p: Report): void {
  if (v === null) return;
  if (!isObj(v)) {
    p(path, 'reward components must be a mapping');
    return;
  }
  for (const [k, component] of Object.entries(v)) {
    if (k === '') p(path, 'reward component names must be non-empty strings');
    else if (component === null) p(at(path, k), `reward component '${k}' must not be null`);
    else {
      const what = finiteRewardProblem(component);
      if (what) p(at(path, k), what);
    }
  }
}

function finiteRewardProblem(v: unknown): string | undefined {
  if (v === null) return undefined;
  if (typeof v === 'boolean') return 'reward must be numeric, not boolean';
  const parsed = typeof v === 'number' ? v : typeof v === 'string' ? pyFloat(v) : undefined;
  if (parsed === undefined) return 'reward must be numeric';
  if (!Number.isFinite(parsed)) return 'reward must be finite';
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Field checks (pydantic lax mode on JSON values)
// ---------------------------------------------------------------------------------------------

function model(x: unknown, path: string, p: Report, spec: Record<string, Field>, extra: 'ignore' | 'forbid' = 'ignore'): Json | undefined {
  if (!isObj(x)) {
    p(path || '(document)', 'must be an object');
    return undefined;
  }
  for (const [k, field] of Object.entries(spec)) {
    const v = x[k];
    if (v === undefined) {
      if (field.required) p(at(path, k), 'required');
    } else field.check(v, at(path, k), p);
  }
  if (extra === 'forbid') for (const k of Object.keys(x)) if (!Object.hasOwn(spec, k)) p(at(path, k), 'extra key (forbidden)');
  return x;
}

interface Bounds {
  ge?: number;
  gt?: number;
  le?: number;
}

function bounded(n: number, b: Bounds, path: string, p: Report): void {
  // NaN fails every comparison, as in pydantic.
  if (b.ge !== undefined && !(n >= b.ge)) p(path, `must be >= ${b.ge}`);
  if (b.gt !== undefined && !(n > b.gt)) p(path, `must be > ${b.gt}`);
  if (b.le !== undefined && !(n <= b.le)) p(path, `must be <= ${b.le}`);
}

function int(b: Bounds = {}): Check {
  return (v, path, p) => {
    const n = laxInt(v);
    if (n === undefined) p(path, 'must be an integer');
    else bounded(n, b, path, p);
  };
}

function float(b: Bounds = {}): Check {
  return (v, path, p) => {
    const n = laxFloat(v);
    if (n === undefined) p(path, 'must be a number');
    else bounded(n, b, path, p);
  };
}

const str: Check = (v, path, p) => {
  if (typeof v !== 'string') p(path, 'must be a string');
};

const bool: Check = (v, path, p) => {
  if (laxBool(v) === undefined) p(path, 'must be a boolean');
};

const dict: Check = (v, path, p) => {
  if (!isObj(v)) p(path, 'must be an object');
};

function nonBlank(what: string): Check {
  return (v, path, p) => {
    if (typeof v !== 'string') p(path, 'must be a string');
    else if (v.trim() === '') p(path, what);
  };
}

function oneOf(values: readonly string[]): Check {
  return (v, path, p) => {
    if (typeof v !== 'string' || !values.includes(v)) p(path, `must be one of ${values.join(' | ')}`);
  };
}

function nullable(check: Check): Check {
  return (v, path, p) => {
    if (v !== null) check(v, path, p);
  };
}

function listOf(check: Check): Check {
  return (v, path, p) => {
    if (!Array.isArray(v)) p(path, 'must be a list');
    else v.forEach((item, i) => check(item, at(path, i), p));
  };
}

function dictOf(check: Check): Check {
  return (v, path, p) => {
    if (!isObj(v)) p(path, 'must be an object');
    else for (const [k, item] of Object.entries(v)) check(item, at(path, k), p);
  };
}

const INT_STRING = /^\s*[+-]?\d+(?:_\d+)*(?:\.0*)?\s*$/;
const FLOAT_STRING = /^\s*[+-]?(?:\d+(?:_\d+)*(?:\.(?:\d+(?:_\d+)*)?)?|\.\d+(?:_\d+)*)(?:[eE][+-]?\d+)?\s*$/;
const SPECIAL_FLOAT = /^\s*([+-]?)(inf|infinity|nan)\s*$/i;

/** pydantic's lax int: bool, an integral number, or an integer string ("2", " 2 ", "1_000", "2.0"). */
export function laxInt(v: unknown): number | undefined {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return Number.isInteger(v) ? v : undefined;
  if (typeof v === 'string' && INT_STRING.test(v)) return Number.parseInt(v.replace(/_/g, ''), 10);
  return undefined;
}

/** pydantic's lax float: bool, any number, or a numeric string (inf and nan included); approximates its string grammar. */
export function laxFloat(v: unknown): number | undefined {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return pyFloat(v);
  return undefined;
}

/** Python's float(str). */
function pyFloat(s: string): number | undefined {
  const special = SPECIAL_FLOAT.exec(s);
  if (special) return special[2]?.toLowerCase() === 'nan' ? Number.NaN : special[1] === '-' ? -Infinity : Infinity;
  return FLOAT_STRING.test(s) ? Number(s.replace(/_/g, '').trim()) : undefined;
}

const TRUE_STRINGS = new Set(['1', 'on', 't', 'true', 'y', 'yes']);
const FALSE_STRINGS = new Set(['0', 'off', 'f', 'false', 'n', 'no']);

export function laxBool(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (v === 0 || v === 1) return v === 1;
  if (typeof v === 'string') {
    const s = v.toLowerCase();
    if (TRUE_STRINGS.has(s)) return true;
    if (FALSE_STRINGS.has(s)) return false;
  }
  return undefined;
}

function collect(run: (p: Report) => void): string[] {
  const problems: string[] = [];
  run((path, what) => problems.push(`${path}: ${what}`));
  return problems;
}

function at(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
