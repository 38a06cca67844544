import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { Store } from '../../src/store/store.js';
import { aggregateLikeGym } from '../support/gym-rollouts.js';
import { converse, recordMixedSession } from '../support/mixed-session.js';
import { contiguityProblems, gymResultProblems } from '../support/nemo-gym-schema.js';
import { openaiFormatProblems } from '../support/openai-format.js';
import { nodeAgentHarness, polarCli } from '../support/polar-cli.js';
import { echoScript, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 25, exports a consumer takes as they are. `--format sft` lines are what NeMo-RL's
 * openai_format dataset and SFT processor read (test/support/openai-format.ts, from NeMo-RL's
 * source): before, a line carried the token ids NeMo-RL's server had been handed on each earlier
 * assistant message, and vLLM's copy of the reasoning. `--format nemo-gym` lines are Gym
 * rollouts.jsonl rows that Gym's own aggregation reads (test/support/gym-rollouts.ts): one per
 * sample, keyed by task and rollout index, each session counted once. Side calls and sessions
 * recorded by `polar replay` are left out and counted unless asked for.
 */
const polar = (args: string[]) => polarCli(args, { timeout: patient(120_000), maxBuffer: 256 * 1024 * 1024 });

const lines = (stdout: string): Record<string, any>[] =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe('export --format sft: what NeMo-RL openai_format reads, nothing else', () => {
  let reference: ReferenceUpstream;
  let nemo: MockServer;
  let viaVllm: TestProxy;
  let viaNemo: TestProxy;
  beforeAll(async () => {
    reference = await startReferenceUpstream();
    nemo = await startMockServer({ script: echoScript, nemoRl: { temperature: 1, topP: 1 } });
    viaVllm = await startTestProxy(reference.url);
    viaNemo = await startTestProxy(nemo.url, { upstreamKind: 'nemo-rl' });
    await converse(viaNemo, 'sft-nemo', 'main', 3);
    await recordMixedSession(viaVllm, reference, 'sft-vllm');
  }, patient(60_000));
  afterAll(async () => {
    await viaNemo?.close();
    await viaVllm?.close();
    await nemo?.close();
    await reference?.close();
  });

  it('nemo-rl upstream: the token ids pinned on earlier assistant messages stay out of the example', async () => {
    // What went upstream did carry them (NeMo-RL splices them): the problem this export must not pass on.
    const last = viaNemo.store.requests.list('sft-nemo').at(-1)!;
    const sent = JSON.parse(viaNemo.store.requests.get(last.id)!.upstreamRequest!) as { messages: Record<string, unknown>[]; tools?: unknown[] };
    expect(sent.messages.some((m) => Array.isArray(m.prompt_token_ids) && Array.isArray(m.generation_token_ids))).toBe(true);
    const r = await polar(['export', '--db', viaNemo.dbPath, '--session', 'sft-nemo', '--format', 'sft']);
    expect(r.stderr).toMatch(/export sft: 1 written, 0 left out\n/);
    const [example] = lines(r.stdout);
    expect(openaiFormatProblems(example)).toEqual([]);
    expect(r.stdout).not.toMatch(/token_ids|log_probs/);
    // The same conversation, message for message: roles, text, tool calls and reasoning kept.
    expect(example!.messages.map((m: { role: string }) => m.role)).toEqual([...sent.messages.map((m) => m.role), 'assistant']);
    sent.messages.forEach((m, i) => {
      expect(example!.messages[i].content).toEqual(m.content);
      if (m.tool_calls)
        expect(example!.messages[i].tool_calls).toEqual(
          (m.tool_calls as { id: string; function: unknown }[]).map((c) => ({ id: c.id, type: 'function', function: c.function })),
        );
      if (m.reasoning_content) expect(example!.messages[i].reasoning_content).toBe(m.reasoning_content);
    });
    expect(example!.tools).toEqual(sent.tools ?? []);
  });

  it('vllm upstream: reasoning once (as reasoning_content), every line valid; side, failed and sub-agent calls counted', async () => {
    const sent = viaVllm.store.requests
      .list('sft-vllm')
      .map((c) => JSON.parse(viaVllm.store.requests.get(c.id)!.upstreamRequest ?? '{}') as { messages?: Record<string, unknown>[] });
    expect(sent.some((b) => b.messages?.some((m) => typeof m.reasoning === 'string' && typeof m.reasoning_content === 'string'))).toBe(true);
    const r = await polar(['export', '--db', viaVllm.dbPath, '--session', 'sft-vllm', '--format', 'sft']);
    expect(r.code, r.stderr).toBe(0);
    const examples = lines(r.stdout);
    expect(examples.length).toBeGreaterThan(3);
    for (const example of examples) expect(openaiFormatProblems(example)).toEqual([]);
    expect(r.stdout).not.toContain('"reasoning":');
    expect(
      examples.some((e) =>
        e.messages.some((m: Record<string, unknown>) => m.role === 'assistant' && typeof m.reasoning_content === 'string' && m !== e.messages.at(-1)),
      ),
    ).toBe(true);
    // The mixed session has one side call (no tools) and one failed call: counted, no longer dropped silently.
    expect(r.stderr).toMatch(new RegExp(`export sft: ${examples.length} written, 2 left out: (1 side call, 1 failed call|1 failed call, 1 side call)\\n`));
    expect(r.stderr).toMatch(/left out 1: side call \(no tools offered\) \(--include-side-calls keeps it\)/);
    const withSide = await polar(['export', '--db', viaVllm.dbPath, '--session', 'sft-vllm', '--format', 'sft', '--include-side-calls']);
    const all = lines(withSide.stdout);
    expect(all).toHaveLength(examples.length + 1);
    const title = all.find((e) => e.messages[0].content === 'Write a 3-word title.');
    expect(title).toBeDefined();
    expect(openaiFormatProblems(title)).toEqual([]);
    expect(withSide.stderr).toMatch(/1 left out: 1 failed call\n/);
  });

  it('the validator rejects what the export used to write', () => {
    const old = {
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: 'ok',
          reasoning: 'r',
          reasoning_content: 'r',
          prompt_token_ids: [1],
          generation_token_ids: [2],
          generation_log_probs: [-1],
        },
        { role: 'user', content: 'more' },
      ],
      tools: [],
    };
    expect(openaiFormatProblems(old)).toEqual([
      "messages[-1].role: must be 'assistant' (oai_format_dataset.py:193 asserts it)",
      ...['reasoning', 'prompt_token_ids', 'generation_token_ids', 'generation_log_probs'].map(
        (k) => `messages[1].${k}: not a chat field: reaches the chat template and the training batch as it is (llm_message_utils.py:565-567, :635)`,
      ),
    ]);
  });
});

/** A small agent: a tool-using conversation of three turns; `rewrite` rewrites its history after the first (a compaction), `title` adds a side call; the reward is its `reward=`. */
const AGENT = `
import fs from 'node:fs';
const prompt = process.argv[2] ?? '';
const headers = { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY };
const tools = [{ type: 'function', function: { name: 'list_files', description: 'List files', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];
async function chat(body) {
  const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers, body: JSON.stringify({ model: 'any', ...body }) });
  if (!res.ok) { console.error(res.status, await res.text()); process.exit(3); }
  return (await res.json()).choices[0].message;
}
let messages = [{ role: 'system', content: 'You are a careful agent.' }, { role: 'user', content: 'Please use a tool to look around. ' + prompt }];
for (let turn = 0; turn < 3; turn++) {
  const m = await chat({ messages, tools });
  messages.push({ role: 'assistant', content: m.content ?? '', ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}), ...(m.reasoning_content ? { reasoning_content: m.reasoning_content } : {}) });
  for (const c of m.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: c.id, content: 'README.md main.py' });
  if (!m.tool_calls?.length) messages.push({ role: 'user', content: 'Go on.' });
  if (prompt.includes('rewrite') && turn === 0) messages = [messages[0], { role: 'user', content: 'Summary of the work so far: looked around. Continue.' }];
}
if (prompt.includes('title')) await chat({ messages: [{ role: 'user', content: 'Write a 3-word title for: ' + prompt }] });
fs.writeFileSync('answer.txt', (/reward=([0-9.]+)/.exec(prompt)?.[1] ?? '0') + '\\n');
`;

describe('export --format nemo-gym: Gym rollouts.jsonl rows, one per sample; side calls and replays counted', () => {
  let reference: ReferenceUpstream;
  let dir: string;
  let db: string;
  let agent: string;
  let rolloutId: string;
  beforeAll(async () => {
    reference = await startReferenceUpstream();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-export-gym-'));
    db = path.join(dir, 'polar.db');
    agent = path.join(dir, 'agent.mjs');
    fs.writeFileSync(agent, AGENT);
    const tasks = path.join(dir, 'tasks.jsonl');
    const task = (id: string, prompt: string) =>
      JSON.stringify({ id, prompt, workspace: { empty: true }, evaluator: { type: 'command', command: 'cat answer.txt' } });
    fs.writeFileSync(tasks, [task('alpha', 'reward=1 title'), task('beta', 'reward=0.5'), task('gamma', 'reward=1 rewrite')].join('\n'));
    const r = await polar([
      'rollout',
      '--tasks',
      tasks,
      ...nodeAgentHarness(agent),
      '--upstream',
      reference.url,
      '--upstream-kind',
      'vllm-tito',
      '--tokenizer',
      'bundled:qwen3',
      '--samples',
      '2',
      '--db',
      db,
      '--sandbox',
      'none',
      '--out',
      path.join(dir, 'work'),
      '--json',
    ]);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({ ok: true, outcomes: { completed: 6, error: 0 } });
    rolloutId = summary.rolloutId;
  }, patient(180_000));
  afterAll(async () => {
    await reference?.close();
    if (dir) removeTree(dir);
  });

  it('one Gym-valid row per merged sample, keyed by task and rollout index, with task and group ids; a consumer counts each session once', async () => {
    const r = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'nemo-gym']);
    expect(r.code, r.stderr).toBe(0);
    const rows = lines(r.stdout);
    // alpha and beta: one trace per sample. gamma rewrote its history: two traces each, so left out, not split.
    expect(rows).toHaveLength(4);
    expect(r.stderr).toMatch(/export nemo-gym: 4 written, 4 left out: /);
    expect(r.stderr).toMatch(/2 side calls/);
    expect(r.stderr).toMatch(/2 unmerged sessions/);
    expect(r.stderr).toMatch(/left out 2: session did not merge into one token chain: its main agent has 2 traces/);
    const store = Store.open(db, { readonly: true });
    try {
      const samples = store.rollouts.samples(rolloutId);
      for (const row of rows) {
        expect(gymResultProblems(row)).toEqual([]);
        expect(contiguityProblems(row)).toEqual([]);
        expect(row.agent_ref).toEqual({ type: 'responses_api_agents', name: 'polar_agent' });
        const sample = samples.find((s) => s.sessionId === row.polar.session_id)!;
        expect(row).toMatchObject({
          task_id: sample.taskId,
          group_id: sample.groupId,
          reward: sample.reward,
          polar: { rollout_id: rolloutId, task_id: sample.taskId, group_id: sample.groupId, sample_index: sample.sampleIndex, rewarded: true },
        });
        // The sample's main trace is all its tool-offering calls: three turns, the side call not among them.
        expect(row.polar.request_ids).toEqual(
          store.requests
            .tokens(row.polar.session_id)
            .filter((c) => c.toolCount > 0)
            .map((c) => c.id),
        );
        expect(row.response.output.filter((o: Record<string, unknown>) => 'generation_token_ids' in o)).toHaveLength(3);
      }
      // Gym's reading: sorted and keyed by (task, rollout), grouped by task; a duplicate key would throw.
      const groups = aggregateLikeGym(rows).get('polar_agent')!;
      expect(groups.map((g) => [g.lines[0]!.task_id, g.lines.map((l) => l._ng_rollout_index), g.rewards])).toEqual([
        ['alpha', [0, 1], [1, 1]],
        ['beta', [0, 1], [0.5, 0.5]],
      ]);
      expect(new Set(rows.map((l) => l.polar.session_id)).size).toBe(rows.length);
      for (const g of groups)
        expect(new Set(g.lines.map((l) => l.group_id))).toEqual(new Set([samples.find((s) => s.taskId === g.lines[0]!.task_id)!.groupId]));
    } finally {
      store.close();
    }
  });

  it("--include-side-calls is refused for nemo-gym (a side call is never part of a sample's row) and keeps them for tokens", async () => {
    const refused = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'nemo-gym', '--include-side-calls']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/POLAR_USAGE.*--include-side-calls does not apply to --format nemo-gym/);
    const plain = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'tokens']);
    const withSide = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'tokens', '--include-side-calls']);
    expect(lines(plain.stdout)).toHaveLength(8);
    expect(plain.stderr).toMatch(/export tokens: 8 written, 2 left out: 2 side calls\n/);
    expect(lines(withSide.stdout)).toHaveLength(10);
    expect(withSide.stderr).toMatch(/export tokens: 10 written, 0 left out\n/);
  });

  it('a session recorded by polar replay is left out and counted unless --include-replays; --json has the counts', async () => {
    const store = Store.open(db, { readonly: true });
    const alpha = store.rollouts.samples(rolloutId).find((s) => s.taskId === 'alpha')!;
    store.close();
    const replay = await polar(['replay', alpha.sessionId!, '--harness', 'custom', '--command', `${process.execPath} ${agent} {prompt}`, '--db', db, '--json']);
    expect(replay.code, replay.stdout + replay.stderr).toBe(0);
    const { replaySession } = JSON.parse(replay.stdout) as { replaySession: string };
    const out = path.join(dir, 'rollouts.jsonl');
    const r = await polar(['export', '--db', db, '--format', 'nemo-gym', '--out', out, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      ok: true,
      format: 'nemo-gym',
      written: 4,
      leftOut: 5,
      leftOutByKind: { 'replay session': 1, 'side call': 2, 'unmerged session': 2 },
    });
    expect(r.stderr).toMatch(/left out 1: replay session: recorded by polar replay from .* \(--include-replays keeps it\)/);
    expect(lines(fs.readFileSync(out, 'utf8')).map((l) => l.polar.session_id)).not.toContain(replaySession);
    const included = await polar(['export', '--db', db, '--format', 'nemo-gym', '--include-replays']);
    const rows = lines(included.stdout);
    expect(rows).toHaveLength(5);
    const replayed = rows.find((l) => l.polar.session_id === replaySession)!;
    // Not a rollout sample: a task index of its own, no task or group id, and the side call of the replay counted.
    expect(replayed).toMatchObject({ task_id: null, group_id: null, _ng_rollout_index: 0, polar: { rewarded: false } });
    expect(
      aggregateLikeGym(rows)
        .get('polar_agent')!
        .map((g) => g.lines.length),
    ).toEqual([2, 2, 1]);
    expect(included.stderr).toMatch(/export nemo-gym: 5 written, 5 left out: /);
    expect(included.stderr).toMatch(/3 side calls/);
    const misuse = await polar(['export', '--db', db, '--format', 'nemo-gym', '--json']);
    expect(misuse.code).toBe(2);
  });
});
