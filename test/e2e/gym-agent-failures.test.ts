import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { Store } from '../../src/store/store.js';
import { gymRunResult } from '../../src/train/gym-agent/result.js';
import { batchAdvantages, gymResultSample } from '../../src/train/nemo-rl/advantages.js';
import { nodeAgentHarness } from '../support/polar-cli.js';
import { gymAgentArgs, startPolarServer } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * How `polar gym-agent` fails, against the mock in NeMo-RL mode with a small real agent (the custom
 * harness: one model call through polar asking for 32,000 output tokens, then it writes its answer):
 * infrastructure failures are run again inside the agent, what still fails is masked, too many
 * failures stop NeMo-RL with a 400 that says what to fix, the row's max_output_tokens caps every
 * call, and a call without logprobs masks its sample.
 */
let mock: MockServer;
let dir: string;
let tasksFile: string;
let agentScript: string;
let marker: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  mock = await startMockServer({ nemoRl: { temperature: 1, topP: 1 } });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-gym-fail-'));
  agentScript = path.join(dir, 'agent.mjs');
  fs.writeFileSync(
    agentScript,
    `const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', max_tokens: 32000, messages: [{ role: 'user', content: process.argv[2] }], tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }] }) });
if (!r.ok) process.exit(3);
await r.json();
(await import('node:fs')).writeFileSync('answer.txt', process.argv[2].split(' ').pop() + '\\n');`,
  );
  marker = path.join(dir, 'flaky-once');
  tasksFile = path.join(dir, 'tasks.jsonl');
  const task = (id: string, setup: string[] = [], evaluator: object = { type: 'command', command: 'cat answer.txt' }) =>
    JSON.stringify({ id, prompt: 'answer with 1', workspace: { empty: true }, setup, evaluator, timeout: patientSeconds(60) });
  // Its evaluator scores the first sample to reach it 0, the second 1, and hangs on every later one
  // until its timeout: a group with real mixed rewards and one sample that ends without a reward.
  const slots = path.join(dir, 'verdict-slots');
  fs.mkdirSync(slots);
  const verdict = `n=0; while ! mkdir ${slots}/$n 2>/dev/null; do n=$((n+1)); done; [ $n -lt 2 ] || sleep 60; echo $((n % 2))`;
  fs.writeFileSync(
    tasksFile,
    [
      task('good'),
      // Fails its first setup only: a transient failure the agent must absorb.
      task('flaky', [`test -f ${marker} || { touch ${marker}; exit 1; }`]),
      // Fails every time: still masked after the retries.
      task('broken', ['echo no such dataset >&2; exit 3']),
      task('verdict', [], { type: 'command', command: verdict, timeout: 3 }),
    ].join('\n'),
  );
});
afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await mock?.close();
  removeTree(dir);
});

async function startAgent(name: string, extra: string[]): Promise<{ url: string; db: string; stderr: () => string }> {
  const db = path.join(dir, `${name}.db`);
  const args = [...gymAgentArgs([...nodeAgentHarness(agentScript), '--sandbox', 'none'], mock, db, tasksFile, path.join(dir, `out-${name}`)), ...extra];
  const { json, stderr } = await startPolarServer(args, children);
  return { url: json.url as string, db, stderr };
}

const row = (taskId: string, maxOutputTokens?: number) => ({
  responses_create_params: {
    input: [{ role: 'user', content: 'answer with 1' }],
    temperature: 1,
    top_p: 1,
    ...(maxOutputTokens !== undefined ? { max_output_tokens: maxOutputTokens } : {}),
  },
  agent_ref: { type: 'responses_api_agents', name: 'polar_agent' },
  task_id: taskId,
});

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, any> }> {
  const res = await fetch(`${url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

describe('polar gym-agent failure semantics', () => {
  let agent: { url: string; db: string; stderr: () => string };
  beforeAll(async () => {
    // A window too wide to trip here: these rows test retries and masks.
    // --context-window as polar train grpo passes it (NeMo-RL's server lists no models to learn it from).
    agent = await startAgent('retries', ['--infra-retries', '2', '--failure-window', '100', '--context-window', '16384']);
  }, patient(120_000));

  it('runs a row again when its setup fails, and answers the attempt that worked', { timeout: patient(120_000) }, async () => {
    const { status, json } = await post(agent.url, row('flaky'));
    expect(status).toBe(200);
    expect(json.instance_config, json.polar_mask_reason).toBeUndefined();
    expect(json.reward).toBe(1);
    expect(json.polar_attempts).toBe(2);
    const store = Store.open(agent.db, { readonly: true });
    try {
      const rollout = store.db.prepare('SELECT rollout_id FROM samples WHERE session_id = ?').get(json.polar_session_id) as { rollout_id: string };
      const tries = store.rollouts.samples(rollout.rollout_id).filter((s) => s.taskId === 'flaky');
      expect(tries.map((s) => [s.status, s.errorStage])).toEqual([
        ['error', 'init'],
        ['completed', null],
      ]);
    } finally {
      store.close();
    }
    expect(agent.stderr()).toMatch(/task flaky: attempt 1 of 3 failed \(the workspace or its setup failed/);
  });

  it('masks a row whose setup fails every time, after the retries, saying why', { timeout: patient(120_000) }, async () => {
    const { status, json } = await post(agent.url, row('broken'));
    expect(status).toBe(200);
    expect(json.instance_config).toEqual({ mask_sample: true });
    expect(json.polar_attempts).toBe(3);
    expect(json.polar_mask_reason).toMatch(/error at init/);
    expect(json.reward).toBe(0);
  });

  it("caps every call's max_tokens at the row's max_output_tokens (the harness asked for 32,000); without one, the context window still applies", {
    timeout: patient(120_000),
  }, async () => {
    const capped = await post(agent.url, row('good', 64));
    const free = await post(agent.url, row('good'));
    const store = Store.open(agent.db, { readonly: true });
    try {
      const sent = (session: string) =>
        store.requests.list(session).map((c) => (JSON.parse(store.requests.get(c.id)!.upstreamRequest!) as { max_tokens?: number }).max_tokens);
      expect(sent(capped.json.polar_session_id)).toEqual([64]);
      // 32,000 cannot fit a 16,384 window: dropped, so the server gives what the context leaves.
      expect(sent(free.json.polar_session_id)).toEqual([undefined]);
    } finally {
      store.close();
    }
  });

  it('masks a sample whose calls came back without logprobs, instead of training on zeros', { timeout: patient(120_000) }, async () => {
    const { json } = await post(agent.url, row('good'));
    expect(json.instance_config).toBeUndefined();
    // The same recorded session, its call's logprobs gone (a server that returned ids but none).
    const store = Store.open(agent.db);
    try {
      store.db.prepare('UPDATE requests SET logprobs = NULL WHERE session_id = ?').run(json.polar_session_id);
      const sample = store.rollouts.sampleForSession(json.polar_session_id)!;
      const again = gymRunResult(store, sample, json.responses_create_params, 'm');
      expect(again.instance_config).toEqual({ mask_sample: true });
      expect(again.polar_mask_reason).toMatch(/1 of 1 calls have no logprobs/);
    } finally {
      store.close();
    }
  });

  it('answers a sample whose evaluator timed out with reward 0 in its group: the agent could have caused it, so it is not masked', {
    timeout: patient(120_000),
  }, async () => {
    // One task's group of 3, posted at once as NeMo-RL posts a step's rows: its evaluator scores two
    // samples 0 and 1 and times out on the third. The agent's code runs under an evaluator, so a
    // timeout there is a failure the agent can cause: it scores 0 with the reason (masking it, as an
    // error, would let a policy drop its failures out of the group).
    const answers = (await Promise.all([0, 1, 2].map((i) => post(agent.url, { ...row('verdict'), _rowidx: i })))).map((a) => a.json);
    expect(answers.filter((a) => a.instance_config?.mask_sample)).toEqual([]);
    const store = Store.open(agent.db, { readonly: true });
    let timedOut: (typeof answers)[number] | undefined;
    try {
      for (const a of answers) {
        const sample = store.rollouts.sampleForSession(a.polar_session_id)!;
        expect(sample).toMatchObject({ status: 'completed', error: null });
        if (typeof sample.evaluator?.forfeit === 'string') {
          expect(sample.evaluator.forfeit).toMatch(/the evaluator command timed out after 3 s/);
          timedOut = a;
        }
      }
    } finally {
      store.close();
    }
    expect(timedOut?.reward).toBe(0);
    expect(answers.map((a) => a.reward).sort()).toEqual([0, 0, 1]);
    // The three answers as NeMo-RL reads them and computes its advantages (advantages.ts, its rule):
    // one group of three, every sample in the loss.
    type GymResult = Parameters<typeof gymResultSample>[0];
    const adv = batchAdvantages(
      answers.map((a) => gymResultSample(a as GymResult)!),
      { leaveOneOut: true, normalize: true },
    );
    expect(adv.groupSizes).toEqual([3]);
    expect(adv.inLoss).toEqual([true, true, true]);
    const byReward = answers.map((a, k) => [a.reward, adv.advantages[k]!] as const);
    for (const [reward, a] of byReward) expect(Math.sign(a)).toBe(reward === 1 ? 1 : -1);
  });
});

describe('polar gym-agent stops NeMo-RL when too many rows fail outside the policy', () => {
  it('answers 400 with what to fix once more than --max-failed-share of the window failed, and every row after', { timeout: patient(120_000) }, async () => {
    const agent = await startAgent('trip', ['--infra-retries', '0', '--failure-window', '2', '--max-failed-share', '0.5']);
    // One step's rows, posted at once: both fail their setup.
    const answers = await Promise.all([0, 1].map((i) => post(agent.url, { ...row('broken'), _rowidx: i })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 400]);
    const stopped = answers.find((a) => a.status === 400)!.json;
    expect(stopped.error.code).toBe('POLAR_TOO_MANY_FAILURES');
    expect(stopped.error.message).toMatch(
      /2 of the last 2 rows failed for reasons outside the policy \(more than --max-failed-share 0\.5\).*Fix the setup.*2× the workspace or its setup failed/,
    );
    // A good row after that is not run at all: the run is over.
    const after = await post(agent.url, row('good'));
    expect(after.status).toBe(400);
    expect(after.json.error.message).toBe(stopped.error.message);
    expect(agent.stderr()).toContain('stopping NeMo-RL');
  });
});
