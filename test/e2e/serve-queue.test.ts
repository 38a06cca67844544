import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, type MockServerOptions, startMockServer } from '../../src/mock-server/server.js';
import { taskResultProblems, taskStatusProblems } from '../../src/serve/contract/polar-models.js';
import { mirrorPath } from '../../src/store/postgres/journal.js';
import { makeHosts, namespacesUnavailable, type Hosts } from '../support/netns.js';
import { patient } from '../support/patience.js';
import { polarCli } from '../support/polar-cli.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';
import { callbackListener, type Json, serveClient, slimeRequest } from './serve-support.js';
import { BIN, expectSessionCapturedExactly, startPolarServer } from './support.js';

/**
 * `polar serve --queue`: the same Slime-bridge-shaped task as serve.test.ts, its sessions run by two
 * `polar worker`s on two other machines: network namespaces on a bridge, each with its own
 * hostname, $HOME and state folder, reaching PostgreSQL and the reference upstream (vllm-tito, the
 * real Qwen3 tokenizer and template) only at this machine's bridge address; nothing on disk is
 * shared with the coordinator but the code. The coordinator reads everything from PostgreSQL.
 */
const skip = namespacesUnavailable();
const STRICT = { polarEmits: true, publicRelease: true };
const TOKEN = 'polar-queue-test-token';
let hosts: Hosts;
let server: TestPostgres;
let mock: MockServer;
const mockOptions: MockServerOptions = {};
let dir: string;
let url: string;
let serveUrl = '';
let serveLog: () => string = () => '';
let db: pg.Client;
const children: ChildProcess[] = [];
const workerLogs: string[] = [];
let listener: Awaited<ReturnType<typeof callbackListener>>;
const { post, get, settled } = serveClient(() => serveUrl);
const slime = (taskId: string, extra: Json = {}) => slimeRequest(listener.url, taskId, extra);
const testEnv = () => ({ ...process.env, NO_COLOR: '1', POLAR_STATE_DIR: path.join(dir, 'test-state') });

beforeAll(async () => {
  if (skip) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-serve-queue-'));
  hosts = makeHosts('polar-sq', 211, 2);
  server = await startTestPostgres({ network: { address: hosts.hub, subnet: hosts.subnet } });
  url = await server.database('serve_queue');
  db = new pg.Client({ connectionString: url });
  await db.connect();
  Object.assign(mockOptions, { host: hosts.hub, authToken: TOKEN });
  mock = await startMockServer(mockOptions);
  listener = await callbackListener();
  const { json, stderr } = await startPolarServer(['serve', '--port', '0', '--json', '--queue', url], children, {
    POLAR_STATE_DIR: path.join(dir, 'serve-state'),
  });
  serveUrl = json.url as string;
  serveLog = stderr;
  const hostUrl = url.replace('@127.0.0.1:', `@${hosts.hub}:`);
  hosts.hosts.forEach((_, i) => {
    const [cmd, args] = hosts.command(i, [
      process.execPath,
      BIN,
      'worker',
      '--queue',
      hostUrl,
      '--harness',
      'codex',
      '--upstream',
      mock.url,
      '--upstream-kind',
      'vllm-tito',
      '--tokenizer',
      'bundled:qwen3',
      '--concurrency',
      '1',
      '--out',
      path.join(dir, `out-${i}`),
      '--json',
    ]);
    const home = path.join(dir, `home-${i}`);
    fs.mkdirSync(home);
    const child = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, HOME: home, POLAR_STATE_DIR: path.join(dir, `state-${i}`), POLAR_UPSTREAM_API_KEY: TOKEN, NO_COLOR: '1' },
    });
    workerLogs[i] = '';
    child.stdout!.on('data', (d) => (workerLogs[i] += d));
    child.stderr!.on('data', (d) => (workerLogs[i] += d));
    children.push(child);
  });
  // Both workers take samples before the first task is queued, so each takes one session.
  await waitUntil('both workers ready', () => workerLogs.every((l) => /ready for \S+ samples/.test(l)), {
    everyMs: 200,
    stopIf: () => (children.some((c) => c.exitCode !== null) ? `a process exited early:\n${workerLogs.join('\n---\n')}` : null),
  });
  // Each reached PostgreSQL from its own host's address, not this machine's.
  const { rows } = await db.query(`SELECT DISTINCT host(client_addr) AS a FROM pg_stat_activity WHERE client_addr IS NOT NULL`);
  for (const h of hosts.hosts) expect(rows.map((r) => r.a)).toContain(h.address);
}, patient(120_000));

afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => exited(c, 20_000)));
  await db?.end().catch(() => undefined);
  await listener?.close();
  await mock?.close();
  await server?.close();
  hosts?.remove();
  if (dir) removeTree(dir);
}, patient(60_000));

/** Resolves once `c` has exited, killing it after `ms`. */
function exited(c: ChildProcess, ms: number): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => c.kill('SIGKILL'), ms);
    c.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

const samplesOf = async (rolloutId: string) =>
  (await db.query(`SELECT id, status, worker, error, error_stage FROM samples WHERE rollout_id = $1 ORDER BY sample_index`, [rolloutId])).rows;

describe.skipIf(skip)('polar serve --queue: two workers in two network namespaces', () => {
  let status: Json;
  beforeAll(async () => {
    const submitted = await post(slime('polar-swegym-grpo-29-43'));
    expect(submitted).toEqual({ status: 200, body: { task_id: 'polar-swegym-grpo-29-43', status: 'running' } });
    expect((await post(slime('polar-swegym-grpo-29-43'))).status).toBe(409);
    status = await settled('polar-swegym-grpo-29-43');
    for (let i = 0; i < 100 && !listener.callbacks.some((c) => c.status === 200); i++) await new Promise((r) => setTimeout(r, 200));
  }, patient(300_000));

  it('returns 2 COMPLETED sessions, one rewarded trace each, valid by Polar models, run on the two workers', async () => {
    expect(taskStatusProblems(status, STRICT)).toEqual([]);
    expect(status).toMatchObject({ task_id: 'polar-swegym-grpo-29-43', status: 'completed', total_sessions: 2, completed_sessions: 2 });
    for (const r of status.results as Json[]) {
      expect(r, JSON.stringify(r.error)).toMatchObject({ status: 'COMPLETED', error: null, metadata: { group_id: 29, policy_version: 3, rollout_step: 3 } });
      expect(r.trajectory.traces).toHaveLength(1);
      const t = r.trajectory.traces[0];
      expect(t.reward).toBe(1);
      expect(t.loss_mask).toContain(1);
      t.loss_mask.forEach((m: number, i: number) => m === 0 && expect(t.response_logprobs[i]).toBe(0));
    }
    const rows = await samplesOf(status.results[0].trajectory.metadata.polar.rollout_id);
    expect(rows.map((r) => r.status)).toEqual(['completed', 'completed']);
    // Each session on its own machine: the worker names its host (own hostname) and process.
    const machines = rows.map((r) => String(r.worker).split('/')[0]).sort();
    expect(machines).toEqual(hosts.hosts.map((h) => h.name).sort());
  });

  it("posts the TaskResult to callback_url, trying again after the listener's failure, equal to the poll", () => {
    expect(listener.callbacks.map((c) => c.status)).toEqual([503, 200]);
    const body = listener.callbacks[1]!.body;
    expect(taskResultProblems(body, STRICT)).toEqual([]);
    expect(body).toEqual({ task_id: status.task_id, status: 'completed', results: status.results, result_paths: [] });
  });

  it("every call is what the server sampled, and the served traces equal polar export's of the shared store", async () => {
    const rollout = status.results[0].trajectory.metadata.polar.rollout_id as string;
    const out = path.join(dir, 'export.jsonl');
    const exported = await polarCli(['export', '--db', url, '--rollout', rollout, '--strategy', 'prefix-merging', '--out', out], { env: testEnv() });
    expect(exported.code, exported.stderr).toBe(0);
    // export --rollout reads only that rollout's rows (a scoped read, no mirror): the whole store's
    // mirror is pulled here, as any unscoped reader pulls it, to check every call against the server's log.
    const sessions = await polarCli(['sessions', '--db', url, '--json'], { env: testEnv() });
    expect(sessions.code, sessions.stderr).toBe(0);
    const mirror = mirrorPath(url, testEnv());
    for (const r of status.results as Json[]) expect(expectSessionCapturedExactly(mirror, r.session_id, mock)).toBeGreaterThanOrEqual(2);
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

  it('early stop: once one session is usable the rest are cut off on their workers, still num_samples results', { timeout: patient(300_000) }, async () => {
    expect((await post(slime('queued-early-stop', { num_samples: 3, early_stop_min_usable_sessions: 1, callback_url: null }))).status).toBe(200);
    const s = await settled('queued-early-stop');
    expect(taskStatusProblems(s, STRICT)).toEqual([]);
    expect(s).toMatchObject({ status: 'completed', total_sessions: 3 });
    expect(s.results).toHaveLength(3);
    const cut = (s.results as Json[]).filter((r) => r.metadata.early_stop_cancelled === true);
    expect(cut.length).toBeGreaterThanOrEqual(1);
    for (const r of cut) {
      expect(r).toMatchObject({ status: 'ERROR', error: expect.stringMatching(/minimum usable session count/) });
      for (const t of r.trajectory.traces) expect(t.loss_mask.every((m: number) => m === 0)).toBe(true);
    }
    expect((s.results as Json[]).filter((r) => r.status === 'COMPLETED').length).toBeGreaterThanOrEqual(1);
    // In the shared store the stragglers ended once, cut (a worker that was running one could not end it again).
    const rows = await samplesOf(s.results[0].trajectory.metadata.polar.rollout_id);
    const cutRows = rows.filter((r) => r.error_stage === 'cancel');
    expect(cutRows.map((r) => r.id).sort()).toEqual(cut.map((r) => r.trajectory.metadata.polar.sample_id).sort());
  });

  it("pauses every worker's model calls around a weight update as Slime's hook does, waiting for the calls in flight", {
    timeout: patient(300_000),
  }, async () => {
    const nodes = (await (await fetch(`${serveUrl}/nodes`)).json()) as Json[];
    expect(nodes).toEqual([{ node_id: expect.stringMatching(/^polar-/), gateway_url: serveUrl, healthy: true }]);
    const gateway = nodes[0]!.gateway_url as string;
    const pause = async (seconds: number) => (await fetch(`${gateway}/admin/inference/pause?timeout_seconds=${seconds}`, { method: 'POST' })).json();
    const resume = async () => (await fetch(`${gateway}/admin/inference/resume`, { method: 'POST' })).json();
    // Each model reply takes 15 s: the session's first call is in flight when the pause comes.
    mockOptions.latencyMs = 15_000;
    try {
      const seen = mock.requestCount();
      expect((await post(slime('queued-drain', { num_samples: 1, callback_url: null }))).status).toBe(200);
      await waitUntil("the session's first model call at the server", () => mock.requestCount() > seen);
      // Not drained within 1 s: the bridge must not swap weights (a worker not heard from yet counts as one call too).
      const early = (await pause(1)) as Json;
      expect(early.paused).toBe(true);
      expect(early.inflight).toBeGreaterThanOrEqual(1);
      // Given time, the call ends and the next one waits at the worker's proxy: drained.
      expect(await pause(60)).toEqual({ paused: true, inflight: 0 });
      delete mockOptions.latencyMs;
      const before = mock.calls.length;
      await new Promise((r) => setTimeout(r, 4000));
      expect(mock.calls.length).toBe(before);
      expect(await (await fetch(`${gateway}/admin/inference/status`)).json()).toEqual({ paused: true, inflight: 0 });
      expect((await get('queued-drain')).status).toBe('running');
    } finally {
      delete mockOptions.latencyMs;
      expect(await resume()).toMatchObject({ paused: false });
    }
    const s = await settled('queued-drain');
    expect(s.results[0]).toMatchObject({ status: 'COMPLETED' });
  });

  it('a worker that holds a session and never said it paused counts as a call in flight', { timeout: patient(60_000) }, async () => {
    // One that does not listen (a lost listener, an older polar) but runs a session in this store.
    await db.query(
      `INSERT INTO samples (id, rollout_id, task_id, sample_index, group_id, status, worker) VALUES ('ghost-s', 'ghost-r', 't', 0, 'g', 'running', 'ghost-host/1')`,
    );
    const pause = async (seconds: number) => (await fetch(`${serveUrl}/admin/inference/pause?timeout_seconds=${seconds}`, { method: 'POST' })).json();
    try {
      const held = (await pause(1)) as Json;
      expect(held).toMatchObject({ paused: true });
      expect(held.inflight).toBeGreaterThanOrEqual(1);
      expect(serveLog()).toMatch(/worker ghost-host\/1 runs a session and has not said it paused/);
      await db.query(`DELETE FROM samples WHERE id = 'ghost-s'`);
      expect(await pause(30)).toEqual({ paused: true, inflight: 0 });
    } finally {
      await db.query(`DELETE FROM samples WHERE id = 'ghost-s'`);
      expect(await (await fetch(`${serveUrl}/admin/inference/resume`, { method: 'POST' })).json()).toMatchObject({ paused: false });
    }
  });

  it('DELETE while the workers run the sessions: their harnesses are stopped, the task cancelled, the workers go on', {
    timeout: patient(300_000),
  }, async () => {
    // Every model reply now takes a minute: both sessions are mid-call when the task is cancelled.
    mockOptions.latencyMs = 60_000;
    try {
      const seen = mock.requestCount();
      expect((await post(slime('queued-cancel', { callback_url: null }))).status).toBe(200);
      let rolloutId = '';
      await waitUntil('both sessions running on the workers', async () => {
        const { rows } = await db.query(`SELECT id FROM rollouts WHERE config::jsonb->>'polar_task_id' = 'queued-cancel'`);
        rolloutId = rows[0]?.id ?? '';
        return rolloutId !== '' && (await samplesOf(rolloutId)).every((r) => r.status === 'running');
      });
      await waitUntil("both sessions' model calls at the server", () => mock.requestCount() >= seen + 2);
      let cutOff = false;
      void mock.clientGone().then(() => (cutOff = true));
      const res = await fetch(`${serveUrl}/rollout/task/queued-cancel`, { method: 'DELETE' });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).status).toBe('cancelling');
      const s = await settled('queued-cancel');
      expect(taskStatusProblems(s, STRICT)).toEqual([]);
      expect(s.status).toBe('cancelled');
      for (const r of s.results as Json[]) expect(r).toMatchObject({ status: 'ERROR', error: expect.stringMatching(/cancelled/) });
      // The harnesses' calls, held at the model server, were cut: the workers stopped them.
      await waitUntil('the held model calls cut off (the workers stopped their harnesses)', () => cutOff, { timeoutMs: 30_000 });
      await waitUntil('both workers said they stopped a harness', () => workerLogs.every((l) => /was ended elsewhere \(error\); stopping its harness/.test(l)));
      expect((await samplesOf(rolloutId)).map((r) => [r.status, r.error_stage])).toEqual([
        ['error', 'cancel'],
        ['error', 'cancel'],
      ]);
    } finally {
      delete mockOptions.latencyMs;
    }
    // The workers are free again and take the next task.
    expect((await post(slime('after-cancel', { num_samples: 2, callback_url: null }))).status).toBe(200);
    const after = await settled('after-cancel');
    expect((after.results as Json[]).map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED']);
  });
});

describe('polar serve --queue: what it refuses', () => {
  it('a queue that is not PostgreSQL, and a --db other than the queue', async () => {
    const notPg = await polarCli(['serve', '--port', '0', '--queue', 'queue.db']);
    expect(notPg.code).toBe(2);
    expect(notPg.stderr).toMatch(/--queue must be a postgres:\/\/ URL/);
    const twoStores = await polarCli(['serve', '--port', '0', '--queue', 'postgres://u@127.0.0.1:9/q', '--db', 'polar.db']);
    expect(twoStores.code).toBe(2);
    expect(twoStores.stderr).toMatch(/with --queue the tasks live in the queue's database: drop --db/);
    const noUpstream = await polarCli(['serve', '--port', '0']);
    expect(noUpstream.code).toBe(2);
    expect(noUpstream.stderr).toMatch(/--upstream URL \(or --queue URL/);
  });
});
