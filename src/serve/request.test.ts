import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTaskRequest, type RequestError, type ServedTask } from './request.js';

/**
 * Every TaskRequest field (Polar's src/polar/rollout/models.py:70-94, pinned in
 * fixtures/polar-api/contract.json) accepted with its meaning, or refused by name: 422 where Polar's
 * models reject the body, 400 naming the field where polar does not run it.
 */
const BASE = {
  task_id: 'polar-slime-3-42',
  instruction: 'Fix the bug.',
  agent: { harness: 'codex' },
};
const ok = (body: unknown): ServedTask => {
  const r = parseTaskRequest(body, 900);
  if ('detail' in r) throw new Error(`refused: ${JSON.stringify(r)}`);
  return r;
};
const no = (body: unknown): RequestError => {
  const r = parseTaskRequest(body, 900);
  if (!('detail' in r)) throw new Error('accepted');
  return r as RequestError;
};
const locs = (e: RequestError) => e.detail.map((d) => d.loc.join('.'));

describe('TaskRequest fields', () => {
  it('defaults as Polar defaults them: 1 sample, priority 0, no early stop, 600 s, per_request, no evaluator, no callback', () => {
    const t = ok(BASE);
    expect(t).toMatchObject({ taskId: 'polar-slime-3-42', samples: 1, priority: 0, earlyStop: null, budgetMs: 600_000, strategy: 'per-request' });
    expect(t).toMatchObject({ evaluator: null, callbackUrl: null, metadata: {}, harness: 'codex' });
    expect(t.task).toMatchObject({ id: 'polar-slime-3-42', prompt: 'Fix the bug.', workspace: { empty: true }, timeout: 900 });
  });
  it('task_id and instruction are required strings (422)', () => {
    expect(locs(no({ ...BASE, task_id: undefined }))).toContain('body.task_id');
    expect(no({ ...BASE, instruction: 5 }).status).toBe(422);
  });
  it('num_samples: the group size, ≥ 1, lax ints as pydantic takes them', () => {
    expect(ok({ ...BASE, num_samples: 16 }).samples).toBe(16);
    expect(ok({ ...BASE, num_samples: '2' }).samples).toBe(2);
    expect(no({ ...BASE, num_samples: 0 }).status).toBe(422);
  });
  it('dispatch_priority: 0..100, the order free slots go in', () => {
    expect(ok({ ...BASE, dispatch_priority: 100 }).priority).toBe(100);
    expect(locs(no({ ...BASE, dispatch_priority: 101 }))).toEqual(['body.dispatch_priority']);
  });
  it('early_stop_min_usable_sessions: at most num_samples', () => {
    expect(ok({ ...BASE, num_samples: 4, early_stop_min_usable_sessions: 3 }).earlyStop).toBe(3);
    expect(no({ ...BASE, num_samples: 2, early_stop_min_usable_sessions: 3 }).detail[0]!.msg).toMatch(/cannot exceed num_samples/);
  });
  it("timeout_seconds: the session's one budget from INIT, > 0", () => {
    expect(ok({ ...BASE, timeout_seconds: 2.5 }).budgetMs).toBe(2500);
    expect(no({ ...BASE, timeout_seconds: 0 }).status).toBe(422);
  });
  it("metadata: echoed; agent_timeout is the agent's own budget, a positive number (no coercion)", () => {
    const t = ok({ ...BASE, metadata: { group_id: 7, policy_version: 3, rollout_step: 3, agent_timeout: 30 } });
    expect(t.metadata).toEqual({ group_id: 7, policy_version: 3, rollout_step: 3, agent_timeout: 30 });
    expect(t.task.timeout).toBe(30);
    expect(no({ ...BASE, metadata: { agent_timeout: '30' } }).detail[0]!.msg).toMatch(/agent_timeout must be a positive finite number/);
  });
  it('metadata.eval_sampling_seed_base is refused: sampling is pinned by polar serve', () => {
    expect(locs(no({ ...BASE, metadata: { eval_sampling_seed_base: 5 } }))).toEqual(['body.metadata.eval_sampling_seed_base']);
  });
  it('callback_url: where the TaskResult goes; an http(s) URL', () => {
    expect(ok({ ...BASE, callback_url: 'http://127.0.0.1:41237/callback/task_result' }).callbackUrl).toBe('http://127.0.0.1:41237/callback/task_result');
    expect(locs(no({ ...BASE, callback_url: 'file:///etc/passwd' }))).toEqual(['body.callback_url']);
  });
  it("agent.harness: Polar's names for polar's harnesses; the rest, import_path and shell refused by name", () => {
    const names = { claude_code: 'claude-code', codex: 'codex', gemini_cli: 'gemini-cli', qwen_code: 'qwen-code', opencode: 'opencode', pi: 'pi' };
    for (const [polar, ours] of Object.entries(names)) expect(ok({ ...BASE, agent: { harness: polar } }).harness).toBe(ours);
    for (const h of ['mini_swe_agent', 'openhands_sdk', 'hermes']) expect(no({ ...BASE, agent: { harness: h } }).detail[0]!.msg).toContain(JSON.stringify(h));
    expect(locs(no({ ...BASE, agent: { import_path: 'pkg:Harness' } }))).toEqual(['body.agent.import_path']);
    expect(no({ ...BASE, agent: { harness: 'shell', custom_shell: { command: 'ls' } } }).status).toBe(400);
    expect(no({ ...BASE, agent: { harness: 'codex', import_path: 'a:b' } }).status).toBe(422);
  });
  it('agent.model_name and the codex preset settings are noticed, not applied; other settings, env, MCP, skills refused', () => {
    const t = ok({ ...BASE, agent: { harness: 'codex', model_name: 'gpt-5.4', settings: { version: '', reasoning_effort: 'xhigh' } } });
    expect(t.notices.join('\n')).toMatch(/model_name "gpt-5.4" is not used/);
    expect(t.notices.join('\n')).toMatch(/settings.version is ignored/);
    expect(locs(no({ ...BASE, agent: { harness: 'codex', settings: { step_limit: 50 } } }))).toEqual(['body.agent.settings.step_limit']);
    expect(no({ ...BASE, agent: { harness: 'codex', settings: { model_kwargs: { temperature: 0 } } } }).detail[0]!.msg).toMatch(/sampling is pinned/);
    expect(locs(no({ ...BASE, agent: { harness: 'codex', env: { A: 'b' } } }))).toEqual(['body.agent.env']);
    expect(locs(no({ ...BASE, agent: { harness: 'codex', skills_path: '/s' } }))).toEqual(['body.agent.skills_path']);
    expect(locs(no({ ...BASE, agent: { harness: 'codex', mcp_servers: [{ name: 'x', transport: 'stdio', command: 'x' }] } }))).toEqual([
      'body.agent.mcp_servers',
    ]);
  });
  it("builder: per_request and prefix_merging; prefix_merging's own config noticed; router_policy and a class refused", () => {
    expect(ok({ ...BASE, builder: { strategy: 'prefix_merging', config: { end_of_turn_token_id: 151645 } } }).strategy).toBe('prefix-merging');
    expect(ok({ ...BASE, builder: { strategy: 'per_request' } }).strategy).toBe('per-request');
    expect(locs(no({ ...BASE, builder: { strategy: 'router_policy' } }))).toEqual(['body.builder.strategy']);
    expect(locs(no({ ...BASE, builder: { strategy: 'per_request', config: { x: 1 } } }))).toEqual(['body.builder.config.x']);
  });
  it('evaluator: session_completed runs, harbor with a runtime; test_on_output and the others are refused by name', () => {
    expect(ok({ ...BASE, evaluator: { strategy: 'session_completed' } }).evaluator).toBe('session_completed');
    for (const e of ['test_on_output', 'harbor', 'swebench_harness', 'harbor_rubric', 'spilot_harbor']) {
      const r = no({ ...BASE, evaluator: { strategy: e, config: { tests_dir: '/t' } } });
      expect(r.status).toBe(400);
      expect(locs(r)).toContain('body.evaluator.strategy');
    }
    expect(no({ ...BASE, evaluator: { strategy: 'test_on_output', config: {} } }).detail[0]!.msg).toMatch(/can print itself.*runner's own report/);
    expect(locs(no({ ...BASE, evaluator: { strategy: 'session_completed', refresh_runtime: true } }))).toEqual(['body.evaluator.refresh_runtime']);
  });
  it("evaluator harbor: tests_dir and verifier_timeout applied, env the verifier's; other layouts and a cost reward refused", () => {
    const runtime = { image: 'debian:12-slim' };
    const t = ok({
      ...BASE,
      runtime,
      evaluator: { strategy: 'harbor', config: { tests_dir: '/t', verifier_timeout: 30 }, env: { K: 'v' }, refresh_runtime: true },
    });
    expect(t).toMatchObject({ evaluator: 'harbor', harbor: { testsDir: '/t', verifierTimeoutSec: 30, env: { K: 'v' } } });
    expect(t.notices.join('\n')).toMatch(/refresh_runtime/);
    expect(
      ok({ ...BASE, runtime, evaluator: { strategy: 'harbor', config: { tests_dir: '/t', test_command: 'bash /tests/test.sh' } } }).harbor!.verifierTimeoutSec,
    ).toBe(120);
    const r = no({
      ...BASE,
      runtime,
      evaluator: { strategy: 'harbor', config: { tests_target: '/x', verifier_dir: '/v', test_command: 'pytest', emit_cost_reward: true, other: 1 } },
    });
    expect(locs(r).sort()).toEqual(
      ['tests_dir', 'tests_target', 'verifier_dir', 'test_command', 'emit_cost_reward', 'other'].map((k) => `body.evaluator.config.${k}`).sort(),
    );
  });
  it("runtime: null is polar's sandbox with an empty workspace; a docker image is the session's container, each field applied or refused", () => {
    expect(ok({ ...BASE, runtime: null })).toMatchObject({ runtime: null, task: { workspace: { empty: true } } });
    const t = ok({
      ...BASE,
      runtime: {
        image: ' debian:12-slim ',
        workdir: '/polar/session/workspace',
        env: { HOME: '/polar/session/home' },
        prepare: [
          { type: 'exec', command: 'mkdir -p w', env: { A: '1' }, max_attempts: 3 },
          { type: 'exec', command: 'true', cwd: '/' },
          { type: 'upload_dir', source: '/src', target: '/dst' },
        ],
        eval_prepare: [],
        allow_internet: false,
        cpus: 2,
        memory_mb: 2048,
        storage_mb: 100,
        network: 'bridge',
      },
    });
    expect(t.runtime).toEqual({
      image: 'debian:12-slim',
      workdir: '/polar/session/workspace',
      env: { HOME: '/polar/session/home' },
      prepare: [
        { exec: 'mkdir -p w', cwd: '/polar/session', env: { A: '1' } },
        { exec: 'true', cwd: '/', env: {} },
        { upload: '/src', target: '/dst' },
      ],
      allowInternet: false,
      cpus: 2,
      memoryMb: 2048,
    });
    expect(t.notices.join('\n')).toMatch(/storage_mb[\s\S]*network[\s\S]*eval_prepare[\s\S]*max_attempts/);
    const r = no({
      ...BASE,
      runtime: {
        backend: 'apptainer',
        image: '/images/x.sif',
        gpus: 1,
        direct_exec_init_command: 'x',
        internet_volumes: ['/a'],
        import_path: 'm:C',
        kwargs: { volumes: ['/a:/b'] },
      },
    });
    expect(locs(r).sort()).toEqual(
      ['backend', 'direct_exec_init_command', 'gpus', 'internet_volumes', 'import_path', 'kwargs.volumes'].map((k) => `body.runtime.${k}`).sort(),
    );
    expect(r.detail.find((d) => d.loc.includes('backend'))!.msg).toMatch(/apptainer image is not run/);
    expect(no({ ...BASE, runtime: { backend: 'docker', image: '  ' } }).status).toBe(422);
  });
  it("runtime values that would leave their Dockerfile line or name serve's own variables are refused by field", () => {
    const r = no({
      ...BASE,
      runtime: {
        image: 'debian:12\nRUN curl evil',
        workdir: '/w/$HOME',
        env: { 'A B': 'x', OK: 'line\nbreak' },
        prepare: [
          { type: 'exec', command: 'true', cwd: 'relative', env: { 'X;rm': '1' } },
          { type: 'upload_file', source: 'f', target: '/opt/$X' },
        ],
      },
      evaluator: { strategy: 'harbor', config: { tests_dir: 't' }, env: { K: '${PGPASSWORD}' } },
    });
    expect(locs(r).sort()).toEqual(
      [
        'body.runtime.image',
        'body.runtime.workdir',
        'body.runtime.env.A B',
        'body.runtime.env.OK',
        'body.runtime.prepare.0.cwd',
        'body.runtime.prepare.0.env.X;rm',
        'body.runtime.prepare.1.target',
        'body.evaluator.env.K',
      ].sort(),
    );
    // A value with $ or quotes is taken literally (runtime-task.ts escapes it), not refused.
    expect(ok({ ...BASE, runtime: { image: 'reg.io:5000/a/b:1@sha256:00', env: { P: 'pa$$"w\\' } } }).runtime!.env.P).toBe('pa$$"w\\');
  });
  it('every refusal at once, each naming its field', () => {
    const r = no({
      ...BASE,
      agent: { harness: 'codex', settings: { step_limit: 1 } },
      builder: { strategy: 'router_policy' },
      runtime: { image: 'x', gpus: 1 },
    });
    expect(locs(r).sort()).toEqual(['body.agent.settings.step_limit', 'body.builder.strategy', 'body.runtime.gpus']);
  });
  it("the bridges' own requests: Slime's SWE-Gym template and Miles' body pass Polar's models and are refused for what polar does not run", () => {
    const expected: Record<string, string[]> = {
      // Slime's recipe: an Apptainer .sif with a host folder mounted, graded by swebench_harness.
      'slime-swegym-task-request.json': ['body.runtime.backend', 'body.runtime.kwargs.volumes', 'body.evaluator.strategy'],
      // Miles': a docker image, the same mount and grader.
      'miles-task-request.json': ['body.runtime.kwargs.volumes', 'body.evaluator.strategy'],
    };
    for (const [file, refused] of Object.entries(expected)) {
      const body = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../fixtures/polar-api', file), 'utf8'));
      const r = no(body);
      expect(r.status, file).toBe(400);
      expect(locs(r).sort(), file).toEqual(refused.sort());
      // Without them (and the settings polar does not apply), the same request runs.
      const { runtime: _r, evaluator: _e, ...rest } = body;
      const t = ok({ ...rest, agent: { harness: body.agent.harness }, evaluator: { strategy: 'session_completed' } });
      expect(t).toMatchObject({ harness: 'codex', strategy: 'prefix-merging', samples: body.num_samples, callbackUrl: body.callback_url });
    }
  });
});
