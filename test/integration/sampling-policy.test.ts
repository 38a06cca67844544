import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { samplingPolicy } from '../../src/upstream/sampling-policy.js';
import { polarCli } from '../support/polar-cli.js';
import { echoScript, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { agentRolloutArgs, writeRolloutTasks } from '../support/agent-rollout.js';
import { SAMPLING_ATTACK } from '../support/sampling-attack.js';
import { startTestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Sampling belongs to the trainer (issue 30, 3). The agent under training holds its session key, so
 * it can send its own requests; here it sends every field we know that chooses its tokens for it
 * (logit_bias, allowed_token_ids, guided decoding, beam search, ignore_eos, a chat template, its own
 * temperature). Inside a rollout they must not reach the server (the logging upstream says what
 * did); through plain capture (pass-through) they reach it, and export and verify-faithfulness must
 * keep those tokens out of the loss and say why.
 */

const ATTACK: Record<string, unknown> = {
  ...SAMPLING_ATTACK,
  presence_penalty: 1.5,
  guided_json: { type: 'object' },
  logits_processors: ['evil.Processor'],
  chat_template_kwargs: { custom: 1 },
};
const ATTACK_FIELDS = Object.keys(ATTACK).filter((k) => !['temperature', 'top_p', 'top_k', 'min_p', 'presence_penalty', 'tool_choice'].includes(k));

/** The agent: one call carrying the attack fields (the prompt is its one argument). */
const AGENT = `
const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({
    model: 'any',
    messages: [{ role: 'user', content: process.argv[2] }],
    tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object' } } }],
    ...${JSON.stringify(ATTACK)},
  }),
});
if (!res.ok) { console.error(await res.text()); process.exit(3); }
await res.json();
`;

let dir: string;
let agent: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-sampling-'));
  agent = path.join(dir, 'agent.mjs');
  fs.writeFileSync(agent, AGENT);
  writeRolloutTasks(path.join(dir, 'tasks.jsonl'), [{ id: 't', prompt: 'choose my own tokens', evaluator: { type: 'command', command: 'echo 1' } }]);
});
afterAll(() => removeTree(dir));

/** One `polar rollout` of the task with `script` as the agent, sampled at 0.6 / 0.95; returns its stderr. */
async function rollout(upstream: ReferenceUpstream, db: string, extra: string[], script = agent): Promise<string> {
  const tasks = path.join(dir, 'tasks.jsonl');
  const args = agentRolloutArgs({ tasks, agent: script, upstream: upstream.url, db, dir }, [
    '--model',
    upstream.model,
    '--samples',
    '1',
    '--temperature',
    '0.6',
    '--top-p',
    '0.95',
    ...extra,
  ]);
  const r = await polarCli(args, { timeout: patient(120_000) });
  expect(r.code, r.stderr).toBe(0);
  return r.stderr;
}

/** The sampling record of every call in the rollout database's one session that made calls, in order. */
function recordedSampling(db: string) {
  const store = Store.open(db, { readonly: true });
  try {
    const session = store.sessions.list().find((s) => store.requests.list(s.id).length > 0)!;
    return store.requests.list(session.id).map((c) => c.sampling);
  } finally {
    store.close();
  }
}

describe('sampling inside a rollout is the trainer’s', () => {
  for (const kind of ['vllm', 'nemo-rl'] as const) {
    it(`${kind}: the session's sampling, guided decoding, beam search, ignore_eos and chat template never reach the server`, async () => {
      // The NeMo-RL stand-in asserts the training pair, as NeMo-RL does.
      const upstream = await startReferenceUpstream(kind === 'nemo-rl' ? { nemoRl: { temperature: 0.6, topP: 0.95 } } : {});
      try {
        const db = path.join(dir, `${kind}.db`);
        const stderr = await rollout(upstream, db, ['--upstream-kind', kind]);
        expect(upstream.calls).toHaveLength(1);
        const sent = upstream.calls[0]!.request;
        for (const k of ATTACK_FIELDS) expect(sent, k).not.toHaveProperty(k);
        expect(sent).toMatchObject({ temperature: 0.6, top_p: 0.95, top_k: -1, min_p: 0, presence_penalty: 0, tool_choice: 'auto' });
        expect(stderr).toMatch(/sampling: pinned by polar \(temperature 0.6, top_p 0.95\)/);
        const [record] = recordedSampling(db);
        expect(record).toMatchObject({ policy: 'trainer', temperature: 0.6, top_p: 0.95, top_k: -1, seed: null, off_policy: [] });
        expect(record!.dropped).toEqual(expect.arrayContaining([...ATTACK_FIELDS, 'temperature', 'top_p', 'top_k', 'tool_choice']));
        // Sampled by the trainer's settings: trainable, and faithful.
        const verify = await polarCli(['verify-faithfulness', '--db', db, '--json']);
        expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, violations: [] });
      } finally {
        await upstream.close();
      }
    });
  }

  for (const kind of ['vllm-tito', 'sglang-tito'] as const) {
    it(`${kind}: the session's sampling numbers and template kwargs are replaced by the trainer's`, async () => {
      const upstream = await startReferenceUpstream();
      const t = await startTestProxy(upstream.url, {
        upstreamKind: kind,
        upstreamOptions: { tokenizer: 'bundled:qwen3' },
        sampling: samplingPolicy('trainer', kind, 0.6, 0.95),
      });
      try {
        const res = await fetch(`${t.proxy.baseUrl('tito')}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...ATTACK }),
        });
        expect(res.status, await res.text()).toBe(200);
        const request = upstream.calls[0]!.request;
        const sent = (kind === 'sglang-tito' ? request.sampling_params : request) as Record<string, unknown>;
        expect(sent).toMatchObject({ temperature: 0.6, top_p: 0.95, top_k: -1, min_p: 0, presence_penalty: 0 });
        expect(sent).not.toHaveProperty(kind === 'sglang-tito' ? 'sampling_seed' : 'seed');
        expect(t.store.requests.list('tito')[0]!.sampling).toMatchObject({ policy: 'trainer', temperature: 0.6, top_k: -1 });
      } finally {
        await t.close();
        await upstream.close();
      }
    });
  }
});

/**
 * The agent's thinking switch: one Anthropic Messages call (`thinking`) and one Responses call
 * (`reasoning.effort`), both asking for `wanted`. Each chooses the chat template's enable_thinking,
 * which decides the prompt the sampled tokens are conditioned on.
 */
function thinkingAgent(wanted: boolean): string {
  return `
const key = process.env.OPENAI_API_KEY;
const post = async (url, body, headers) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  if (!res.ok) { console.error(await res.text()); process.exit(3); }
  await res.json();
};
await post(process.env.ANTHROPIC_BASE_URL + '/v1/messages', {
  model: 'any', max_tokens: 64, messages: [{ role: 'user', content: process.argv[2] }],
  thinking: ${wanted ? "{ type: 'enabled', budget_tokens: 1024 }" : "{ type: 'disabled' }"},
}, { 'x-api-key': process.env.ANTHROPIC_API_KEY ?? key, authorization: 'Bearer ' + (process.env.ANTHROPIC_AUTH_TOKEN ?? key) });
await post(process.env.OPENAI_BASE_URL + '/responses', {
  model: 'any', input: process.argv[2], reasoning: { effort: ${wanted ? "'high'" : "'none'"} },
}, { authorization: 'Bearer ' + key });
`;
}

describe('the thinking switch inside a rollout is the trainer’s', () => {
  const cases = [
    { kind: 'vllm', flag: ['--thinking', 'off'], asks: true, rendered: false },
    { kind: 'nemo-rl', flag: ['--thinking', 'on'], asks: false, rendered: true },
    // The default renders as NeMo-RL's own rollouts do: no switch sent, the template's default.
    { kind: 'vllm', flag: [], asks: false, rendered: null },
    { kind: 'nemo-rl', flag: [], asks: true, rendered: null },
  ] as const;
  for (const { kind, flag, asks, rendered } of cases) {
    it(`${kind} ${flag.join(' ') || '(default)'}: a session asking thinking ${asks} through Anthropic and Responses is rendered with ${rendered ?? 'the template default'}`, async () => {
      const upstream = await startReferenceUpstream(kind === 'nemo-rl' ? { nemoRl: { temperature: 0.6, topP: 0.95 } } : {});
      const name = `thinking-${kind}-${flag.join('') || 'default'}`;
      const script = path.join(dir, `${name}.mjs`);
      fs.writeFileSync(script, thinkingAgent(asks));
      try {
        const db = path.join(dir, `${name}.db`);
        const stderr = await rollout(upstream, db, ['--upstream-kind', kind, ...flag], script);
        expect(stderr).toMatch(new RegExp(`with thinking ${flag[1] ?? 'template'};`));
        expect(upstream.calls).toHaveLength(2);
        for (const call of upstream.calls) {
          if (rendered === null) expect(call.request).not.toHaveProperty('chat_template_kwargs');
          else expect(call.request.chat_template_kwargs).toEqual({ enable_thinking: rendered });
        }
        const records = recordedSampling(db);
        expect(records).toHaveLength(2);
        for (const record of records) {
          // The record shows the switch actually rendered, and names the session's as dropped.
          expect(record).toMatchObject({ policy: 'trainer', thinking: rendered });
          expect(record!.dropped).toContain('thinking');
        }
      } finally {
        await upstream.close();
      }
    });
  }
  for (const kind of ['vllm-tito', 'sglang-tito'] as const) {
    it(`${kind}: polar renders the prompt with the pinned switch, not the session's`, async () => {
      const upstream = await startReferenceUpstream();
      const proxyWith = (thinking: 'on' | 'off') =>
        startTestProxy(upstream.url, {
          upstreamKind: kind,
          upstreamOptions: { tokenizer: 'bundled:qwen3' },
          sampling: samplingPolicy('trainer', kind, undefined, undefined, thinking),
        });
      const ask = async (t: Awaited<ReturnType<typeof proxyWith>>, thinking: boolean) => {
        const res = await fetch(`${t.proxy.baseUrl('tito')}/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'm',
            max_tokens: 32,
            messages: [{ role: 'user', content: 'hi' }],
            thinking: thinking ? { type: 'enabled', budget_tokens: 64 } : { type: 'disabled' },
          }),
        });
        expect(res.status, await res.text()).toBe(200);
        return t.store.requests.list('tito').at(-1)!.sampling;
      };
      try {
        const off = await proxyWith('off');
        try {
          // The mock reads the rendered prompt back: Qwen3's template with thinking off closes an empty <think> block.
          expect(await ask(off, true)).toMatchObject({ thinking: false, dropped: expect.arrayContaining(['thinking']) });
          expect(upstream.calls.at(-1)!.body.chat_template_kwargs).toEqual({ enable_thinking: false });
        } finally {
          await off.close();
        }
        const on = await proxyWith('on');
        try {
          expect(await ask(on, false)).toMatchObject({ thinking: true, dropped: expect.arrayContaining(['thinking']) });
          expect(upstream.calls.at(-1)!.body).not.toHaveProperty('chat_template_kwargs');
        } finally {
          await on.close();
        }
      } finally {
        await upstream.close();
      }
    });
  }
});

describe('pass-through (polar run / proxy) calls that choose their own sampling are flagged', () => {
  let upstream: ReferenceUpstream;
  let db: string;
  let offPolicyCall: string;
  let cleanCall: string;

  beforeAll(async () => {
    upstream = await startReferenceUpstream({ script: echoScript });
    const t = await startTestProxy(upstream.url);
    db = path.join(dir, 'pass-through.db');
    const call = async (extra: Record<string, unknown>, content: string) => {
      const res = await fetch(`${t.proxy.baseUrl('pt')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], ...extra }),
      });
      expect(res.status).toBe(200);
    };
    try {
      await call({}, 'first');
      await call({ logit_bias: { '1234': 100 }, guided_regex: 'yes|no', use_beam_search: true, ignore_eos: true, chat_template: '{{ x }}' }, 'second');
      // Pass-through: what the harness sent is what the server got.
      expect(upstream.calls[1]!.request).toMatchObject({ logit_bias: { '1234': 100 }, guided_regex: 'yes|no', ignore_eos: true });
      [cleanCall, offPolicyCall] = t.store.requests.list('pt').map((r) => r.id) as [string, string];
    } finally {
      // Closed (the database checkpointed) before the commands read it; the proxy's folder goes after.
      await t.proxy.close(1000);
      await t.upstream.close();
      t.store.close();
      if (fs.existsSync(t.dbPath)) fs.copyFileSync(t.dbPath, db);
      removeTree(t.dir);
    }
  });
  afterAll(async () => upstream?.close());

  it('the call records the policy and the fields that took it off the trainer’s distribution', () => {
    const store = Store.open(db, { readonly: true });
    try {
      expect(store.requests.get(offPolicyCall)!.sampling).toMatchObject({
        policy: 'pass-through',
        off_policy: expect.arrayContaining(['logit_bias', 'guided_regex', 'use_beam_search', 'ignore_eos', 'chat_template']),
        dropped: [],
      });
      expect(store.requests.get(cleanCall)!.sampling).toMatchObject({
        policy: 'pass-through',
        off_policy: [],
        temperature: null,
        reference: { temperature: 1, top_p: 1 },
        thinking: null,
      });
    } finally {
      store.close();
    }
  });

  it('export leaves the call out of the loss by default, says why, and --include-off-policy keeps it', async () => {
    const r = await polarCli(['export', '--db', db, '--session', 'pt', '--format', 'tokens', '--out', path.join(dir, 'pt.jsonl'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const lines = fs
      .readFileSync(path.join(dir, 'pt.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { request_ids: string[] });
    expect(lines.flatMap((l) => l.request_ids)).toEqual([cleanCall]);
    expect(r.stdout).toMatch(/off-policy call/);
    expect(r.stdout).toMatch(/logit_bias/);

    const kept = await polarCli(['export', '--db', db, '--session', 'pt', '--format', 'tokens', '--include-off-policy']);
    expect(kept.code, kept.stderr).toBe(0);
    const ids = kept.stdout
      .trim()
      .split('\n')
      .flatMap((l) => (JSON.parse(l) as { request_ids: string[] }).request_ids);
    expect(ids).toContain(offPolicyCall);

    // SFT trains on the re-tokenized text: how a call was sampled does not enter its loss, so it stays.
    const sft = await polarCli(['export', '--db', db, '--session', 'pt', '--format', 'sft', '--json', '--out', path.join(dir, 'pt-sft.jsonl')]);
    expect(sft.code, sft.stderr).toBe(0);
    expect(sft.stdout).not.toMatch(/off-policy call/);
  });

  it('verify-faithfulness reports it as not on-policy instead of faithful', async () => {
    const r = await polarCli(['verify-faithfulness', '--db', db, '--session', 'pt', '--json']);
    expect(r.code).not.toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; violations: { check: string; requestId: string; message: string }[] };
    expect(out.ok).toBe(false);
    expect(out.violations).toEqual([expect.objectContaining({ check: 'on-policy', requestId: offPolicyCall, message: expect.stringMatching(/logit_bias/) })]);
  });
});

describe('previous_response_id', () => {
  it('resolves only within its own session: session B cannot continue session A’s response', async () => {
    const upstream = await startReferenceUpstream();
    const t = await startTestProxy(upstream.url);
    const post = (session: string, body: Record<string, unknown>) =>
      fetch(`${t.proxy.baseUrl(session)}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', ...body }),
      });
    try {
      const first = await post('A', { input: 'The secret word is zebra.' });
      expect(first.status).toBe(200);
      const id = ((await first.json()) as { id: string }).id;
      const stolen = await post('B', { previous_response_id: id, input: 'What was the word?' });
      expect(stolen.status).toBe(400);
      expect(await stolen.text()).toMatch(/not a response this proxy recorded in this session/);
      // Nothing of A's conversation went upstream for B.
      expect(upstream.calls).toHaveLength(1);
      const own = await post('A', { previous_response_id: id, input: 'What was the word?' });
      expect(own.status).toBe(200);
    } finally {
      await t.close();
      await upstream.close();
    }
  });
});
