import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, type MockServerOptions, startMockServer } from '../../src/mock-server/server.js';
import { Store } from '../../src/store/store.js';
import { taskResultProblems, taskStatusProblems } from '../../src/serve/contract/polar-models.js';
import { patient } from '../support/patience.js';
import { polarCli } from '../support/polar-cli.js';
import { removeTree } from '../support/remove-tree.js';
import { callbackListener, type Json, serveClient, slimeRequest } from './serve-support.js';
import { expectSessionCapturedExactly, startPolarServer } from './support.js';

/**
 * `polar serve` as NVIDIA Polar's trainer bridges drive it (fixtures/polar-api/clients.md): a
 * Slime-bridge-shaped TaskRequest (codex, prefix_merging, session_completed, metadata group_id /
 * policy_version / rollout_step, a callback_url on a listener that answers as the bridge's does)
 * against the reference upstream in token-in mode (vllm-tito, the real Qwen3 tokenizer and template).
 * Every answer is checked by Polar's models (polar-models.ts, held to pydantic's verdicts), the
 * traces against `polar export` of the same sessions and the calls against what the server sampled.
 */
const STRICT = { polarEmits: true, publicRelease: true };
let mock: MockServer;
/** The mock's options, read per request: a test may slow its replies down for a while. */
const mockOptions: MockServerOptions = {};
let dir: string;
let url: string;
let db: string;
const children: ChildProcess[] = [];
let listener: Awaited<ReturnType<typeof callbackListener>>;
let callbacks: Awaited<ReturnType<typeof callbackListener>>['callbacks'];
const { post, get, settled } = serveClient(() => url);
const slime = (taskId: string, extra: Json = {}) => slimeRequest(listener.url, taskId, extra);

beforeAll(async () => {
  mock = await startMockServer(mockOptions);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-serve-'));
  db = path.join(dir, 'polar.db');
  listener = await callbackListener();
  callbacks = listener.callbacks;
  const args = ['serve', '--port', '0', '--json', '--upstream', mock.url, '--upstream-kind', 'vllm-tito', '--tokenizer', 'bundled:qwen3'];
  const { json } = await startPolarServer([...args, '--db', db, '--out', path.join(dir, 'out'), '--concurrency', '2'], children);
  url = json.url as string;
}, patient(60_000));

afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  await listener?.close();
  await mock?.close();
  removeTree(dir);
});

describe('polar serve: a Slime-bridge-shaped task', () => {
  let status: Json;
  beforeAll(async () => {
    const submitted = await post(slime('polar-swegym-grpo-29-42'));
    expect(submitted).toEqual({ status: 200, body: { task_id: 'polar-swegym-grpo-29-42', status: 'running' } });
    // A second submit of a running id is Polar's 409 (manager.py:163-168).
    expect((await post(slime('polar-swegym-grpo-29-42'))).status).toBe(409);
    status = await settled('polar-swegym-grpo-29-42');
    for (let i = 0; i < 100 && !callbacks.some((c) => c.status === 200); i++) await new Promise((r) => setTimeout(r, 200));
  }, patient(300_000));

  it('returns 2 COMPLETED sessions, one trace each, rewarded, valid by Polar models', () => {
    expect(taskStatusProblems(status, STRICT)).toEqual([]);
    expect(status).toMatchObject({ task_id: 'polar-swegym-grpo-29-42', status: 'completed', total_sessions: 2, completed_sessions: 2 });
    for (const r of status.results as Json[]) {
      expect(r, JSON.stringify(r.error)).toMatchObject({ status: 'COMPLETED', error: null, task_id: 'polar-swegym-grpo-29-42' });
      expect(r.metadata).toMatchObject({ group_id: 29, policy_version: 3, rollout_step: 3 });
      expect(r.trajectory).toMatchObject({
        status: 'COMPLETED',
        error: null,
        metadata: { group_id: 29, policy_version: 3, rollout_step: 3, builder: 'prefix_merging' },
      });
      expect(r.trajectory.traces).toHaveLength(1);
      const t = r.trajectory.traces[0];
      expect(t.reward).toBe(1);
      expect(t.loss_mask).toHaveLength(t.response_ids.length);
      expect(t.response_logprobs).toHaveLength(t.response_ids.length);
      expect(t.loss_mask).toContain(1);
      expect(t.loss_mask).toContain(0);
      // Polar's interstitial rule: a 0-masked token carries logprob 0.0 (test_engine_trajectory_equivalence.py:295-310).
      t.loss_mask.forEach((m: number, i: number) => m === 0 && expect(t.response_logprobs[i]).toBe(0));
      expect(Object.keys(r.timing).sort()).toEqual(['init_ms', 'postrun_ms', 'register_to_init_queue_ms', 'run_ms']);
    }
  });

  it("posts the TaskResult to callback_url, trying again after the listener's failure, equal to the poll", () => {
    expect(callbacks.map((c) => c.status)).toEqual([503, 200]);
    const body = callbacks[1]!.body;
    expect(taskResultProblems(body, STRICT)).toEqual([]);
    expect(body).toEqual({ task_id: status.task_id, status: 'completed', results: status.results, result_paths: [] });
  });

  it("every call is what the server sampled, and the served traces equal polar export's", async () => {
    const rollout = status.results[0].trajectory.metadata.polar.rollout_id as string;
    for (const r of status.results as Json[]) expect(expectSessionCapturedExactly(db, r.session_id, mock)).toBeGreaterThanOrEqual(2);
    const out = path.join(dir, 'export.jsonl');
    const exported = await polarCli(['export', '--db', db, '--rollout', rollout, '--strategy', 'prefix-merging', '--out', out]);
    expect(exported.code, exported.stderr).toBe(0);
    const lines = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json);
    expect(lines).toHaveLength(2);
    for (const r of status.results as Json[]) {
      const line = lines.find((l) => l.session_id === r.session_id)!;
      const t = r.trajectory.traces[0];
      expect({ p: t.prompt_ids, r: t.response_ids, m: t.loss_mask, l: t.response_logprobs, w: t.reward }).toEqual({
        p: line.prompt_ids,
        r: line.response_ids,
        m: line.loss_mask,
        l: line.response_logprobs,
        w: line.reward,
      });
    }
  });
});

/** Whether a session of the served task's rollout has its row (runHarness writes it as the harness launches). */
function harnessStarted(taskId: string): boolean {
  const store = Store.open(db, { readonly: true });
  try {
    const rollout = store.rollouts.list().find((r) => r.config.polar_task_id === taskId);
    return rollout !== undefined && store.rollouts.samples(rollout.id).some((s) => s.sessionId !== null && store.sessions.get(s.sessionId) !== undefined);
  } finally {
    store.close();
  }
}

describe("polar serve: the bridges' other calls", () => {
  it('early stop: once one session is usable the rest are cut off, still num_samples results', { timeout: patient(300_000) }, async () => {
    const { status } = await post(
      slime('early-stop', { num_samples: 3, early_stop_min_usable_sessions: 1, callback_url: null, builder: { strategy: 'per_request' } }),
    );
    expect(status).toBe(200);
    const s = await settled('early-stop');
    expect(taskStatusProblems(s, STRICT)).toEqual([]);
    expect(s.status).toBe('completed');
    expect(s.results).toHaveLength(3);
    const cut = (s.results as Json[]).filter((r) => r.metadata.early_stop_cancelled === true);
    expect(cut.length).toBeGreaterThanOrEqual(1);
    for (const r of cut) {
      expect(r.status).toBe('ERROR');
      expect(r.error).toMatch(/minimum usable session count/);
      for (const t of r.trajectory.traces) expect(t.loss_mask.every((m: number) => m === 0)).toBe(true);
    }
    const done = (s.results as Json[]).filter((r) => r.status === 'COMPLETED');
    expect(done.length).toBeGreaterThanOrEqual(1);
    // per_request: one trace per model call, every response token sampled (per_request.py:13-46).
    for (const r of done) {
      expect(r.trajectory.metadata.builder).toBe('per_request');
      expect(r.trajectory.traces.length).toBeGreaterThanOrEqual(2);
      for (const t of r.trajectory.traces) {
        expect(t.metadata.request_ids).toHaveLength(1);
        expect(t.loss_mask.every((m: number) => m === 1)).toBe(true);
        expect(t.reward).toBe(1);
      }
    }
  });

  it('DELETE cancels a running task: its sessions end, ERROR and masked; a tombstone refuses a later submit', { timeout: patient(120_000) }, async () => {
    expect((await post(slime('to-cancel', { callback_url: null }))).status).toBe(200);
    const res = await fetch(`${url}/rollout/task/to-cancel`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(['cancelling', 'cancelled']).toContain(((await res.json()) as Json).status);
    const s = await settled('to-cancel');
    expect(taskStatusProblems(s, STRICT)).toEqual([]);
    expect(s.status).toBe('cancelled');
    expect(s.results).toHaveLength(2);
    for (const r of s.results as Json[]) expect(r).toMatchObject({ status: 'ERROR', error: expect.stringMatching(/cancelled/) });
    // A cancelled task may be submitted again (manager.py:166-176); an unknown id cancelled first may not, for a while.
    expect((await fetch(`${url}/rollout/task/never-submitted`, { method: 'DELETE' })).status).toBe(404);
    const tomb = await fetch(`${url}/rollout/task/never-submitted?register_if_missing=true`, { method: 'DELETE' });
    expect(await tomb.json()).toMatchObject({ task_id: 'never-submitted', status: 'cancelled', total_sessions: 0 });
    expect((await post(slime('never-submitted'))).status).toBe(409);
  });

  it('timeout_seconds bounds the whole session: TIMEOUT, its traces masked with reward 0', { timeout: patient(120_000) }, async () => {
    expect((await post(slime('too-short', { num_samples: 1, timeout_seconds: 1.5, callback_url: null }))).status).toBe(200);
    const s = await settled('too-short');
    expect(taskStatusProblems(s, STRICT)).toEqual([]);
    const r = s.results[0] as Json;
    expect(r.status).toBe('TIMEOUT');
    for (const t of r.trajectory.traces) {
      expect(t).toMatchObject({ reward: 0, metadata: { training_filter: { masked: true, reason: 'session_timeout' } } });
      expect(t.metadata.training_filter).not.toHaveProperty('trainable');
      expect(t.loss_mask.every((m: number) => m === 0)).toBe(true);
    }
  });

  it("metadata.agent_timeout running out first is Polar's trainable timeout: the mask kept, reward 0", { timeout: patient(120_000) }, async () => {
    // The first model call is answered at once; every later one takes a minute, so the agent's own
    // 10 s run out mid-session, long before timeout_seconds.
    const before = mock.calls.length;
    Object.defineProperty(mockOptions, 'latencyMs', { configurable: true, get: () => (mock.calls.length > before ? 60_000 : undefined) });
    try {
      const request = slime('agent-timeout', { num_samples: 1, timeout_seconds: 600, callback_url: null, metadata: { group_id: 7, agent_timeout: 10 } });
      expect((await post(request)).status).toBe(200);
      const s = await settled('agent-timeout');
      expect(taskStatusProblems(s, STRICT)).toEqual([]);
      const r = s.results[0] as Json;
      expect(r).toMatchObject({ status: 'TIMEOUT', error: 'agent execution timeout' });
      expect(r.trajectory.metadata.agent_result).toEqual({ status: 'timeout', return_code: -1, timeout_source: 'agent', timeout_stage: 'exec' });
      expect(r.trajectory.traces.length).toBeGreaterThanOrEqual(1);
      for (const t of r.trajectory.traces) {
        expect(t.reward).toBe(0);
        expect(t.loss_mask).toContain(1);
        expect(t.metadata.training_filter).toEqual({
          masked: false,
          reason: 'agent_timeout',
          detail: 'agent execution timeout',
          trainable: true,
          original_reward: 0,
        });
      }
    } finally {
      delete mockOptions.latencyMs;
    }
  });

  it('answers 422 in FastAPI shape, 400 naming the field, 404 for an unknown task; /health and /rollout/status', async () => {
    const bad = await post({ task_id: 't', instruction: 'x', agent: { harness: 'codex' }, dispatch_priority: 500 });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ['body', 'dispatch_priority'] });
    const unsupported = await post({ task_id: 't', instruction: 'x', agent: { harness: 'mini_swe_agent' } });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body.detail[0]).toMatchObject({ loc: ['body', 'agent', 'harness'], msg: expect.stringContaining('mini_swe_agent') });
    expect((await fetch(`${url}/rollout/task/nope`)).status).toBe(404);
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'ok', nodes: 1 });
    expect(((await (await fetch(`${url}/rollout/status`)).json()) as Json).tasks).toMatchObject({ 'polar-swegym-grpo-29-42': 'completed' });
  });

  it("pauses model calls around a weight update as Slime's hook does (GET /nodes, the gateway's pause and resume)", { timeout: patient(120_000) }, async () => {
    const nodes = (await (await fetch(`${url}/nodes`)).json()) as Json[];
    expect(nodes).toEqual([{ node_id: expect.stringMatching(/^polar-/), gateway_url: url, healthy: true }]);
    const gateway = nodes[0]!.gateway_url as string;
    const before = mock.calls.length;
    try {
      expect(await (await fetch(`${gateway}/admin/inference/pause?timeout_seconds=30`, { method: 'POST' })).json()).toEqual({ paused: true, inflight: 0 });
      expect((await post(slime('while-paused', { num_samples: 1, callback_url: null }))).status).toBe(200);
      // The harness starts (its session row is written as it launches) and asks for the model within
      // a second or two; 5 s after its start the call still waits at the proxy, unserved.
      for (let i = 0; i < 600 && !harnessStarted('while-paused'); i++) await new Promise((r) => setTimeout(r, 100));
      expect(harnessStarted('while-paused')).toBe(true);
      await new Promise((r) => setTimeout(r, 5000));
      expect(mock.calls.length).toBe(before);
      expect((await get('while-paused')).status).toBe('running');
    } finally {
      expect(await (await fetch(`${gateway}/admin/inference/resume`, { method: 'POST' })).json()).toMatchObject({ paused: false });
    }
    const s = await settled('while-paused');
    expect(s.results[0]).toMatchObject({ status: 'COMPLETED' });
    expect(mock.calls.length).toBeGreaterThan(before);
  });

  it("refuses a browser's cross-site request by its Origin", async () => {
    const res = await fetch(`${url}/rollout/task/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      body: JSON.stringify(slime('from-a-page')),
    });
    expect(res.status).toBe(403);
    expect((await fetch(`${url}/rollout/task/from-a-page`)).status).toBe(404);
  });
});
