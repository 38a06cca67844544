import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { startCassette, type Cassette } from '../../src/replay/cassette.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { startGymAgent, type RunningGymAgent } from '../../src/train/gym-agent/agent.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * What each of polar's four HTTP servers answers to a path it does not serve or a method a path does
 * not take, now that they route through one router (core/http/router.ts): each keeps its own shape
 * and its own 404-or-405, exactly as before the router. Only the proxy answers 405; the others say
 * 404 for a wrong method, as vLLM, NeMo-RL's server and NeMo Gym's agents do.
 */
const json = { 'content-type': 'application/json' };
let dir: string;
let vllm: MockServer;
let nemo: MockServer;
let t: TestProxy;
let cassette: Cassette;
let agent: RunningGymAgent;

async function call(base: string, method: string, p: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const r = await fetch(`${base}${p}`, { method, headers: json, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-routes-'));
  vllm = await startMockServer({ fast: true });
  nemo = await startMockServer({ fast: true, nemoRl: { temperature: 1, topP: 1 } });
  t = await startTestProxy(vllm.url);
  const recorded = await call(t.proxy.baseUrl('recorded'), 'POST', '/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  expect(recorded.status).toBe(200);
  cassette = await startCassette(t.store, 'recorded');
  const tasksFile = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(tasksFile, `${JSON.stringify({ id: 'known', prompt: 'p', workspace: { empty: true }, evaluator: { type: 'session-completed' } })}\n`);
  agent = await startGymAgent({
    harness: 'custom',
    command: 'true',
    dbPath: path.join(dir, 'polar.db'),
    host: '127.0.0.1',
    port: 0,
    upstreams: [`${nemo.url}/v1`],
    upstreamKind: 'nemo-rl',
    model: nemo.model,
    concurrency: 1,
    timeoutSec: 60,
    sandbox: 'none',
    outDir: path.join(dir, 'out'),
    tasks: { file: tasksFile, tasks: readTaskFile(tasksFile) },
  });
});
afterAll(async () => {
  await agent?.close();
  await cassette?.close();
  await t?.close();
  await nemo?.close();
  await vllm?.close();
  removeTree(dir);
});

describe('mock-server', () => {
  const notFound = { error: { message: 'Not Found', type: 'NotFoundError', param: null, code: 404 } };

  it("answers vLLM's 404 for an unknown path, a wrong method, and a query on a route (vLLM's routes take none)", async () => {
    expect(await call(vllm.url, 'GET', '/nowhere')).toEqual({ status: 404, body: notFound });
    expect(await call(vllm.url, 'GET', '/v1/chat/completions')).toEqual({ status: 404, body: notFound });
    expect((await call(vllm.url, 'GET', '/v1/models?x=1')).status).toBe(404);
    expect(await call(vllm.url, 'GET', '/v1/models')).toMatchObject({ status: 200, body: { object: 'list' } });
  });

  it("as NeMo-RL's server, serves only chat and /tokenize, with FastAPI's bare 404", async () => {
    expect(await call(nemo.url, 'GET', '/v1/models')).toEqual({ status: 404, body: { detail: 'Not Found' } });
    expect(await call(nemo.url, 'POST', '/generate', {})).toEqual({ status: 404, body: { detail: 'Not Found' } });
    expect(await call(nemo.url, 'POST', '/tokenize', { messages: [{ role: 'user', content: 'hi' }] })).toMatchObject({ status: 200 });
  });
});

describe('replay cassette', () => {
  it('answers 404 naming its one endpoint, for a wrong method too; its model list ignores a query', async () => {
    const message = (m: string, p: string) => `polar replay serves POST /v1/chat/completions (a cassette of session recorded); not ${m} ${p}`;
    expect(await call(cassette.url, 'GET', '/v1/chat/completions')).toEqual({
      status: 404,
      body: { object: 'error', message: message('GET', '/v1/chat/completions'), type: 'NotFoundError', code: 404 },
    });
    expect(await call(cassette.url, 'POST', '/v1/completions?x=1', {})).toMatchObject({ status: 404, body: { message: message('POST', '/v1/completions') } });
    expect(await call(cassette.url, 'GET', '/v1/models?x=1')).toMatchObject({ status: 200, body: { data: [{ owned_by: 'polar-replay' }] } });
  });
});

describe('gym-agent', () => {
  it("answers 404 listing its routes (a wrong method too), 501 for Gym's /v1/responses, and the readiness probe", async () => {
    const routes = 'polar gym-agent serves GET /, POST /run, POST /aggregate_metrics';
    expect(await call(agent.url, 'GET', '/run')).toEqual({ status: 404, body: { error: { message: `no route GET /run; ${routes}` } } });
    expect(await call(agent.url, 'POST', '/nowhere?x=1', {})).toEqual({ status: 404, body: { error: { message: `no route POST /nowhere; ${routes}` } } });
    for (const p of ['/v1/responses', '/agent/v1/responses']) expect((await call(agent.url, 'POST', p, {})).status).toBe(501);
    expect(await call(agent.url, 'GET', '/?probe=1')).toMatchObject({ status: 200, body: { status: 'ok', rollout_id: agent.rolloutId } });
    expect(await call(agent.url, 'POST', '/aggregate_metrics', { verify_responses: [{ reward: 1 }, { reward: 0 }] })).toEqual({
      status: 200,
      body: { group_level_metrics: [], agent_metrics: { samples: 2, mean_reward: 0.5 }, key_metrics: { mean_reward: 0.5 } },
    });
  });
});

describe('capture proxy', () => {
  it("answers 405 for a wrong method on a known path and 404 for an unknown one, in that path's API shape", async () => {
    const get = await call(t.proxy.url, 'GET', '/s/x/v1/messages');
    expect(get.status).toBe(405);
    expect(get.body).toMatchObject({ type: 'error', error: { message: expect.stringMatching(/^GET is not supported on \/v1\/messages; supported routes: /) } });
    const none = await call(t.proxy.url, 'GET', '/nowhere');
    expect(none.status).toBe(404);
    expect(none.body).toMatchObject({ error: { message: expect.stringMatching(/^no route for GET \/nowhere; supported routes: /) } });
  });
});
