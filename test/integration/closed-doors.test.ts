import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { startCassette, type Cassette } from '../../src/replay/cassette.js';
import { Store } from '../../src/store/store.js';
import { startGymAgent, type GymAgentOptions, type RunningGymAgent } from '../../src/train/gym-agent/agent.js';
import { mockGymAgentOptions } from '../support/gym-agent-options.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Closed doors (issue 24): every HTTP server polar starts refuses what a web page or a stranger
 * sends it, over plain HTTP with the exact headers a browser (or a rebinding page) would send: a
 * foreign Host, a foreign Origin, Sec-Fetch-Site, a text/plain body (a CORS simple request), a
 * missing token where one is needed, an inline task. Each refusal is checked to have had no effect
 * (no sample, no session, no file a task would have written), and no answer carries CORS headers.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
let dir: string;
let mock: MockServer;
let agent: RunningGymAgent;
let dbPath: string;
let tasksFile: string;
const notices: string[] = [];
const marker = (name: string) => path.join(dir, name);

const agentOptions = (extra: Partial<GymAgentOptions> = {}): GymAgentOptions =>
  mockGymAgentOptions({ mock, dbPath, outDir: path.join(dir, 'out'), tasksFile, notices }, extra);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-doors-'));
  dbPath = path.join(dir, 'polar.db');
  tasksFile = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(
    tasksFile,
    [
      { id: 'known', prompt: 'p', workspace: { empty: true }, setup: [`touch ${marker('known-ran')}`], evaluator: { type: 'session-completed' } },
      { id: 'fails', prompt: 'p', workspace: { empty: true }, setup: ['exit 3'], evaluator: { type: 'session-completed' } },
    ]
      .map((t) => JSON.stringify(t))
      .join('\n'),
  );
  mock = await startMockServer({ nemoRl: { temperature: 1, topP: 1 } });
  agent = await startGymAgent(agentOptions());
});
afterAll(async () => {
  await agent?.close();
  await mock?.close();
  removeTree(dir);
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A raw request: node:http lets a test set Host, Origin and Sec-Fetch-Site exactly as a browser would. */
function request(url: string, options: { method?: string; path?: string; headers?: Record<string, string>; body?: string }): Promise<Answer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, method: options.method ?? 'GET', path: options.path ?? '/', headers: options.headers ?? {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const row = (extra: Record<string, unknown>) =>
  JSON.stringify({ responses_create_params: { input: [{ role: 'user', content: 'p' }], temperature: 1, top_p: 1 }, ...extra });
const json = { 'content-type': 'application/json' };
const samples = () => {
  const store = Store.open(dbPath, { readonly: true });
  try {
    return store.rollouts.samples(agent.rolloutId).length;
  } finally {
    store.close();
  }
};
const noCors = (a: Answer) => expect(Object.keys(a.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);

describe('polar gym-agent refuses browsers and strangers', () => {
  const port = () => new URL(agent.url).port;

  it.each([
    ['a foreign Host (DNS rebinding)', { host: 'attacker.test:PORT' }, 403, /Host "attacker\.test:\d+" is not this server's address/],
    ['a foreign Origin', { origin: 'http://attacker.test' }, 403, /Origin "http:\/\/attacker\.test" is not this server's own/],
    ['Origin null (a sandboxed frame, a file:// page)', { origin: 'null' }, 403, /Origin "null"/],
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }, 403, /Sec-Fetch-Site/],
    ['Sec-Fetch-Site: same-site (another port of this host)', { 'sec-fetch-site': 'same-site' }, 403, /Sec-Fetch-Site/],
    ['a text/plain body (a CORS simple request)', { 'content-type': 'text/plain;charset=UTF-8' }, 415, /Content-Type: application\/json/],
    ['a form body', { 'content-type': 'application/x-www-form-urlencoded' }, 415, /Content-Type: application\/json/],
    ['no content type', {}, 415, /Content-Type: application\/json/],
  ])('refuses /run with %s, before running anything', async (_what, headers, status, message) => {
    const h = Object.fromEntries(Object.entries({ 'content-type': 'application/json', ...headers }).map(([k, v]) => [k, v.replace('PORT', port())]));
    if (!('content-type' in headers) && status === 415) delete h['content-type'];
    const a = await request(agent.url, { method: 'POST', path: '/run', headers: h, body: row({ task_id: 'known' }) });
    expect(a.status).toBe(status);
    expect(JSON.parse(a.body).error.message).toMatch(message);
    noCors(a);
    expect(fs.existsSync(marker('known-ran'))).toBe(false);
    expect(samples()).toBe(0);
  });

  it('answers a CORS preflight 403 with no Access-Control-Allow-* header', async () => {
    const a = await request(agent.url, {
      method: 'OPTIONS',
      path: '/run',
      headers: { origin: 'http://attacker.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(a.status).toBe(403);
    noCors(a);
  });

  it('refuses an inline task (its setup would run as this user) with 400, and runs nothing', async () => {
    const a = await request(agent.url, {
      method: 'POST',
      path: '/run',
      headers: json,
      body: row({
        task: { id: 'evil', prompt: 'p', workspace: { empty: true }, setup: [`touch ${marker('inline-ran')}`], evaluator: { type: 'session-completed' } },
      }),
    });
    expect(a.status).toBe(400);
    expect(JSON.parse(a.body).error.message).toMatch(/defines its task inline .*--allow-inline-tasks/);
    // Also when it names a known task id beside the inline definition.
    const both = await request(agent.url, {
      method: 'POST',
      path: '/run',
      headers: json,
      body: row({
        task_id: 'known',
        task: { id: 'known', prompt: 'p', workspace: { empty: true }, setup: [`touch ${marker('inline-ran')}`], evaluator: { type: 'session-completed' } },
      }),
    });
    expect(both.status).toBe(400);
    expect(fs.existsSync(marker('inline-ran'))).toBe(false);
    expect(samples()).toBe(0);
  });

  it('refuses a row naming no task, or a task not in its --tasks file, with 400', async () => {
    const none = await request(agent.url, { method: 'POST', path: '/run', headers: json, body: row({}) });
    expect(none.status).toBe(400);
    expect(JSON.parse(none.body).error.message).toMatch(/names no task: put "task_id"/);
    const unknown = await request(agent.url, { method: 'POST', path: '/run', headers: json, body: row({ task_id: 'nope' }) });
    expect(unknown.status).toBe(400);
    expect(JSON.parse(unknown.body).error.message).toMatch(/unknown task_id "nope": not a task of .*tasks\.jsonl/);
    const notJson = await request(agent.url, { method: 'POST', path: '/run', headers: json, body: '{"responses_create_params":' });
    expect(notJson.status).toBe(400);
    expect(samples()).toBe(0);
    expect(notices.some((n) => /refused a \/run row: unknown task_id "nope"/.test(n))).toBe(true);
  });

  it('a known task that fails is still answered 200 with mask_sample (NeMo-RL stops on any other status)', async () => {
    const a = await request(agent.url, { method: 'POST', path: '/run', headers: json, body: row({ task_id: 'fails' }) });
    expect(a.status).toBe(200);
    // A failing setup is an infrastructure failure: tried 1 + --infra-retries (2) times, then masked.
    expect(JSON.parse(a.body)).toMatchObject({ reward: 0, instance_config: { mask_sample: true }, polar_attempts: 3 });
    noCors(a);
    expect(samples()).toBe(3);
  });

  it("GET / (Gym's readiness probe) still answers a caller on this machine", async () => {
    const a = await request(agent.url, { headers: { host: `127.0.0.1:${port()}` } });
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body)).toMatchObject({ status: 'ok' });
    expect((await request(agent.url, { headers: { host: 'attacker.test' } })).status).toBe(403);
  });

  it('will not listen beyond loopback without a token; with one, every route but GET / needs it', async () => {
    await expect(startGymAgent(agentOptions({ host: '0.0.0.0' }))).rejects.toThrow(
      /binding 0\.0\.0\.0 exposes it beyond this machine; pass --allow-from ADDRESS\|SUBNET\|HOST .* or --auth-token TOKEN/,
    );
    const token = 'gym-agent-token-0123456789';
    const open = await startGymAgent(agentOptions({ host: '0.0.0.0', authToken: token, dbPath: path.join(dir, 'open.db') }));
    try {
      const url = `http://127.0.0.1:${new URL(open.url).port}`;
      const body = JSON.stringify({ verify_responses: [{ reward: 1 }] });
      expect((await request(url, { method: 'POST', path: '/aggregate_metrics', headers: json, body })).status).toBe(401);
      expect((await request(url, { method: 'POST', path: '/run', headers: json, body: row({ task_id: 'known' }) })).status).toBe(401);
      expect(
        (await request(url, { method: 'POST', path: '/run', headers: { ...json, authorization: 'Bearer wrong' }, body: row({ task_id: 'known' }) })).status,
      ).toBe(401);
      expect((await request(url, { method: 'POST', path: '/aggregate_metrics', headers: { ...json, authorization: `Bearer ${token}` }, body })).status).toBe(
        200,
      );
      expect((await request(url, { method: 'POST', path: '/aggregate_metrics', headers: { ...json, 'x-polar-auth-token': token }, body })).status).toBe(200);
      const ready = await request(url, {});
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.body).rollout_id).toBeUndefined();
      expect(fs.existsSync(marker('known-ran'))).toBe(false);
    } finally {
      await open.close();
    }
  });

  it('--allow-inline-tasks needs a sandbox; without --tasks it must be asked for', async () => {
    await expect(startGymAgent(agentOptions({ allowInlineTasks: true, sandbox: 'none' }))).rejects.toThrow(/--allow-inline-tasks .* needs --sandbox bwrap/);
    const { tasks: _t, ...rest } = agentOptions();
    await expect(startGymAgent(rest)).rejects.toThrow(/gym-agent needs --tasks FILE/);
  });
});

describe('polar replay --serve refuses browsers (a DNS-rebinding page would read the recording)', () => {
  let t: TestProxy;
  let cassette: Cassette;
  let vllm: MockServer;
  const messages = [{ role: 'user', content: 'recorded prompt' }];

  beforeAll(async () => {
    vllm = await startMockServer();
    t = await startTestProxy(vllm.url);
    const reply = await fetch(`${t.proxy.baseUrl('recorded')}/chat/completions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ model: 'm', messages }),
    });
    expect(reply.status).toBe(200);
    cassette = await startCassette(t.store, 'recorded');
  });
  afterAll(async () => {
    await cassette?.close();
    await t?.close();
    await vllm?.close();
  });

  const call = (headers: Record<string, string>) =>
    request(cassette.url, { method: 'POST', path: '/v1/chat/completions', headers: { ...json, ...headers }, body: JSON.stringify({ model: 'm', messages }) });

  it('answers its own caller with the recording (token ids included)', async () => {
    const a = await call({});
    expect(a.status).toBe(200);
    expect(a.body).toContain('token_ids');
  });

  it.each([
    ['a rebound Host', { host: 'attacker.test:PORT', origin: 'http://attacker.test:PORT', 'sec-fetch-site': 'same-origin' }],
    ['a foreign Origin', { origin: 'http://attacker.test' }],
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
  ])('refuses %s: 403, nothing of the recording in the answer', async (_what, headers) => {
    const port = new URL(cassette.url).port;
    const a = await call(Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.replace('PORT', port)])));
    expect(a.status).toBe(403);
    expect(a.body).not.toMatch(/token_ids|logprob|recorded prompt/);
    noCors(a);
    const models = await request(cassette.url, { path: '/v1/models', headers: { host: `attacker.test:${port}` } });
    expect(models.status).toBe(403);
  });

  it('will not listen beyond loopback without a token', async () => {
    await expect(startCassette(t.store, 'recorded', { host: '0.0.0.0' })).rejects.toThrow(/exposes it beyond this machine/);
  });
});

describe('polar mock-server and the proxy share the same door', () => {
  it('mock-server: a foreign Host or Origin gets 403; beyond loopback it needs a token, sent as the upstream API key', async () => {
    const port = new URL(mock.url).port;
    expect((await request(mock.url, { path: '/v1/models', headers: { host: `attacker.test:${port}` } })).status).toBe(403);
    expect(
      (await request(mock.url, { method: 'POST', path: '/v1/chat/completions', headers: { ...json, origin: 'http://attacker.test' }, body: '{}' })).status,
    ).toBe(403);
    await expect(startMockServer({ host: '0.0.0.0' })).rejects.toThrow(/exposes it beyond this machine/);
    const guarded = await startMockServer({ host: '0.0.0.0', authToken: 'mock-token-0123456789' });
    try {
      const url = `http://127.0.0.1:${new URL(guarded.url).port}`;
      expect((await request(url, { path: '/v1/models' })).status).toBe(401);
      expect((await request(url, { path: '/v1/models', headers: { authorization: 'Bearer mock-token-0123456789' } })).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });

  it('polar proxy without --auth-token keeps an admin token 0600 beside the database (named in --json), which opens /admin/*; nothing else does', async () => {
    const db = path.join(dir, 'cli', 'polar.db');
    fs.mkdirSync(path.dirname(db));
    const child = spawn(process.execPath, [BIN, 'proxy', '--upstream', mock.url, '--model', mock.model, '--port', '0', '--db', db, '--json', '-q'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        readline.createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`polar proxy exited ${code}`)));
      });
      const started = JSON.parse(line) as { url: string; adminTokenFile: string };
      expect(started.adminTokenFile).toBe(path.join(path.dirname(db), '.polar', 'admin-token'));
      expect(fs.statSync(started.adminTokenFile).mode & 0o777).toBe(0o600);
      expect(fs.statSync(path.dirname(started.adminTokenFile)).mode & 0o777).toBe(0o700);
      const token = fs.readFileSync(started.adminTokenFile, 'utf8').trim();
      expect((await request(started.url, { path: '/admin/status' })).status).toBe(401);
      expect(
        (await request(started.url, { method: 'POST', path: '/admin/policy-version', headers: json, body: JSON.stringify({ version: 'evil-v1' }) })).status,
      ).toBe(401);
      const ok = await request(started.url, { path: '/admin/status', headers: { 'x-polar-auth-token': token } });
      expect(JSON.parse(ok.body)).toMatchObject({ ok: true, policy_version: null });
    } finally {
      child.kill('SIGTERM');
    }
  });

  it("proxy /admin/*: a loopback caller without the token gets 401; a page's Origin gets 403; the version is not set", async () => {
    const t = await startTestProxy(mock.url, { policyVersion: 'v0', adminToken: 'admin-token-0123456789abcdef0123456789' });
    try {
      const body = JSON.stringify({ version: 'evil-v1' });
      expect((await request(t.proxy.url, { method: 'POST', path: '/admin/policy-version', headers: json, body })).status).toBe(401);
      expect((await request(t.proxy.url, { method: 'POST', path: '/admin/pause', headers: json, body: '{}' })).status).toBe(401);
      expect(
        (
          await request(t.proxy.url, {
            method: 'POST',
            path: '/admin/policy-version',
            headers: { ...json, origin: 'http://attacker.test', 'x-polar-auth-token': 'admin-token-0123456789abcdef0123456789' },
            body,
          })
        ).status,
      ).toBe(403);
      expect(t.proxy.admin.policyVersion).toBe('v0');
      expect(t.proxy.admin.gate.isPaused).toBe(false);
    } finally {
      await t.close();
    }
  });
});
