import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentGymConfig, agentNames, gymRows } from '../../src/train/gym-agent/wiring.js';
import type { Yaml } from '../../src/train/yaml.js';
import { BIN } from './support.js';
import { patient } from '../support/patience.js';
import { namespacesUnavailable } from '../support/netns.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar train grpo --agent-host` across two machines, as two network namespaces joined by a veth
 * pair: the agent's (10.200.0.1) and the trainer's (10.200.0.2, plus 10.200.0.3 as a machine that is
 * not the trainer). The addresses exist only inside those namespaces; nothing leaves them.
 *
 * The trainer side calls the agent the way NeMo Gym's ServerClient does (Gym `c3bac96`):
 * - the URL: the instance named by the row's `agent_ref.name`, its first entry two levels down
 *   (global_config.py:1028-1034), `http://{host}:{port}` (server_utils.py:325-326) + `/run`
 *   (rollout_collection.py:1038);
 * - the request: POST, the row as compact JSON (orjson.dumps) with `Content-Type: application/json`,
 *   the only header Gym sets (server_utils.py:207-214), through a ClientSession with no default
 *   headers, no auth and a DummyCookieJar (:147-159); aiohttp adds its own `Accept: *\/*`,
 *   `Accept-Encoding: gzip, deflate` (ClientRequest.DEFAULT_HEADERS) and `User-Agent: Python/… aiohttp/…`.
 * No token, then: the agent admits the trainer by its address (`--allow-from`).
 */
const TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const id = `${process.pid % 100000}`;
const NS_AGENT = `polar-agent-${id}`;
const NS_TRAINER = `polar-trainer-${id}`;
const AGENT_IP = '10.200.0.1';
const TRAINER_IP = '10.200.0.2';
const STRANGER_IP = '10.200.0.3';
const PORT = 5100;
const TOKEN_PORT = 5101;
const NO_DOOR_PORT = 5102;
const MOCK_PORT = 5103;

const skip = namespacesUnavailable();
const children: ChildProcess[] = [];
let dir: string;
let made = false;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

beforeAll(() => {
  if (skip) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-across-'));
  const [va, vb] = [`pva${id}`, `pvb${id}`];
  ip('netns', 'add', NS_AGENT);
  ip('netns', 'add', NS_TRAINER);
  made = true;
  ip('link', 'add', va, 'type', 'veth', 'peer', 'name', vb);
  ip('link', 'set', va, 'netns', NS_AGENT);
  ip('link', 'set', vb, 'netns', NS_TRAINER);
  ip('-n', NS_AGENT, 'addr', 'add', `${AGENT_IP}/24`, 'dev', va);
  ip('-n', NS_TRAINER, 'addr', 'add', `${TRAINER_IP}/24`, 'dev', vb);
  ip('-n', NS_TRAINER, 'addr', 'add', `${STRANGER_IP}/24`, 'dev', vb);
  for (const [ns, dev] of [
    [NS_AGENT, va],
    [NS_TRAINER, vb],
  ] as const) {
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    ip('-n', ns, 'link', 'set', dev, 'up');
  }
});

afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  if (made) {
    // Deleting a namespace removes the veth pair with it.
    for (const ns of [NS_AGENT, NS_TRAINER]) {
      try {
        ip('netns', 'del', ns);
      } catch {
        /* already gone */
      }
    }
  }
  if (dir) removeTree(dir);
});

/** `polar mock-server` on the agent namespace's loopback, the policy server the agent's upstream names; resolves once it listens. */
function startMock(): Promise<void> {
  const child = spawn('ip', ['netns', 'exec', NS_AGENT, process.execPath, BIN, 'mock-server', '--port', String(MOCK_PORT), '--json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', () => resolve());
    child.once('exit', (code) => reject(new Error(`mock-server exited ${code}: ${stderr}`)));
  });
}

/** `polar gym-agent` inside the agent's namespace; resolves with its `--json` line, or rejects with its stderr. */
function startAgent(flags: string[], name: string): Promise<{ json: Record<string, unknown>; stderr: () => string }> {
  const args = [
    'netns',
    'exec',
    NS_AGENT,
    process.execPath,
    BIN,
    'gym-agent',
    '--harness',
    'custom',
    '--command',
    'true',
    '--sandbox',
    'none',
    // The custom harness `true` makes no model call: the sample is answered masked, which is all a
    // door test needs to see served. The upstream must still answer (issue 40: an unreachable one
    // fails each row at once), so it is polar's mock server in the agent's namespace.
    '--upstream',
    `http://127.0.0.1:${MOCK_PORT}/v1`,
    '--model',
    'policy',
    '--db',
    path.join(dir, `${name}.db`),
    '--tasks',
    TASKS,
    '--out',
    path.join(dir, `out-${name}`),
    '--infra-retries',
    '0',
    '--json',
    ...flags,
  ];
  const child = spawn('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POLAR_AUTH_TOKEN: '', NO_COLOR: '1' } });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    readline
      .createInterface({ input: child.stdout! })
      .once('line', (line) => resolve({ json: JSON.parse(line) as Record<string, unknown>, stderr: () => stderr }));
    child.once('exit', (code) => reject(new Error(`gym-agent exited ${code}: ${stderr}`)));
  });
}

interface Answer {
  status: number;
  body: Record<string, any>;
}

/**
 * One request from the trainer's namespace, from `from` (its source address), in the shape Gym's
 * ServerClient sends (above). A child Node in that namespace makes it and prints the answer.
 */
function callFromTrainer(from: string, method: 'GET' | 'POST', url: string, row?: unknown, extraHeaders: Record<string, string> = {}): Answer {
  const script = `
    const http = require('node:http');
    const [from, method, url, body, extra] = process.argv.slice(1);
    const headers = { Accept: '*/*', 'Accept-Encoding': 'gzip, deflate', 'User-Agent': 'Python/3.12 aiohttp/3.12.15', ...JSON.parse(extra) };
    if (body) { headers['Content-Type'] = 'application/json'; headers['Content-Length'] = Buffer.byteLength(body); }
    const req = http.request(url, { method, headers, localAddress: from }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => process.stdout.write(JSON.stringify({ status: res.statusCode, body: JSON.parse(text) })));
    });
    req.on('error', (e) => { process.stdout.write(JSON.stringify({ status: 0, body: { error: e.message } })); });
    req.end(body || undefined);
  `;
  const out = execFileSync(
    'ip',
    [
      'netns',
      'exec',
      NS_TRAINER,
      process.execPath,
      '-e',
      script,
      from,
      method,
      url,
      row === undefined ? '' : JSON.stringify(row),
      JSON.stringify(extraHeaders),
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  return JSON.parse(out) as Answer;
}

/** How Gym's ServerClient finds an instance's base URL in the merged config. */
function gymBaseUrl(config: Yaml, name: string): string {
  const instance = (config as Record<string, Record<string, Record<string, Record<string, unknown>>>>)[name]!;
  const server = Object.values(Object.values(instance)[0]!)[0]!;
  return `http://${String(server.host)}:${String(server.port)}`;
}

/** A `/run` row as polar train grpo writes it for `agent`, with NeMo-RL's additions (rollouts.py:2222-2244). */
function row(agent: string): Record<string, unknown> {
  const first = JSON.parse(gymRows([{ id: 'create-greeting', prompt: 'Create greeting.txt' } as never], [agent]).trim()) as Record<string, any>;
  return { ...first, responses_create_params: { ...first.responses_create_params, temperature: 1, top_p: 1, max_output_tokens: 4096 }, _rowidx: 0 };
}

describe.skipIf(skip !== null)(`polar gym-agent on another machine, called as NeMo Gym calls it${skip ? ` (skipped: ${skip})` : ''}`, () => {
  // The trainer's Gym config, as polar train grpo --agent-host 10.200.0.1:5100 --no-local-agent writes it.
  const config = agentGymConfig([{ host: AGENT_IP, port: PORT }], false);
  const [name] = agentNames([{ host: AGENT_IP, port: PORT }], false);

  beforeAll(async () => {
    await startMock();
    await startAgent(['--host', AGENT_IP, '--port', String(PORT), '--allow-from', TRAINER_IP], 'allow');
  }, patient(60_000));

  it('the trainer (an --allow-from address) is answered: the readiness probe, then a /run row with a result NeMo-RL can read', () => {
    const base = gymBaseUrl(config, name!);
    expect(base).toBe(`http://${AGENT_IP}:${PORT}`);
    expect(callFromTrainer(TRAINER_IP, 'GET', `${base}/`)).toMatchObject({ status: 200, body: { status: 'ok' } });
    const answer = callFromTrainer(TRAINER_IP, 'POST', `${base}/run`, row(name!));
    expect(answer.status).toBe(200);
    expect(answer.body.response.output.at(-1)).toMatchObject({ generation_token_ids: expect.any(Array), generation_log_probs: expect.any(Array) });
    expect(answer.body).toHaveProperty('reward');
  });

  it('another machine (not in --allow-from) is refused, saying which address and what to add', () => {
    const base = gymBaseUrl(config, name!);
    for (const [method, route] of [
      ['GET', '/'],
      ['POST', '/run'],
    ] as const) {
      const answer = callFromTrainer(STRANGER_IP, method, `${base}${route}`, method === 'POST' ? row(name!) : undefined);
      expect(answer.status).toBe(403);
      expect(answer.body.error.message).toContain(`a call from ${STRANGER_IP} is refused`);
      expect(answer.body.error.message).toContain(`--allow-from ${TRAINER_IP}`);
    }
  });

  it(
    '--allow-from with --auth-token: the trainer must present both, so a call without the token is refused',
    async () => {
      await startAgent(['--host', AGENT_IP, '--port', String(TOKEN_PORT), '--allow-from', `${TRAINER_IP}/32`, '--auth-token', 'sesame'], 'both');
      const url = `http://${AGENT_IP}:${TOKEN_PORT}/run`;
      expect(callFromTrainer(TRAINER_IP, 'POST', url, row(name!))).toMatchObject({ status: 401, body: { error: { code: 'POLAR_UNAUTHORIZED' } } });
      expect(callFromTrainer(TRAINER_IP, 'POST', url, row(name!), { Authorization: 'Bearer sesame' }).status).toBe(200);
      expect(callFromTrainer(STRANGER_IP, 'POST', url, row(name!), { Authorization: 'Bearer sesame' }).status).toBe(403);
    },
    patient(60_000),
  );

  it(
    'beyond loopback with neither --allow-from nor --auth-token, the agent does not start, and says what to add',
    async () => {
      // With --json the refusal is the one line on stdout.
      const { json } = await startAgent(['--host', AGENT_IP, '--port', String(NO_DOOR_PORT)], 'none');
      expect(json).toMatchObject({
        ok: false,
        error: { code: 'POLAR_USAGE', message: expect.stringMatching(/pass --allow-from ADDRESS\|SUBNET\|HOST .* or --auth-token TOKEN/) },
      });
    },
    patient(60_000),
  );
});
