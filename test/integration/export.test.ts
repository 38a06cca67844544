import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { polarExportSession } from '../support/polar-cli.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  const client = new Anthropic({ baseURL: `${t.proxy.url}/s/exp`, apiKey: 'x', maxRetries: 0 });
  const tools: Anthropic.Tool[] = [
    { name: 'list_files', description: 'List files', input_schema: { type: 'object', properties: { path: { type: 'string' } } } },
  ];
  await client.messages
    .stream({ model: 'claude', max_tokens: 500, tools, messages: [{ role: 'user', content: 'Please use a tool to look around.' }] })
    .finalMessage();
  await client.messages.create({ model: 'claude', max_tokens: 500, tools, messages: [{ role: 'user', content: 'Just say hi.' }] });
  // A session of one conversation, for the one-row-per-sample nemo-gym export.
  const single = new Anthropic({ baseURL: `${t.proxy.url}/s/exp-one`, apiKey: 'x', maxRetries: 0 });
  await single.messages.create({ model: 'claude', max_tokens: 500, tools, messages: [{ role: 'user', content: 'Please use a tool to look around.' }] });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const polarExport = (args: string[], session = 'exp'): Promise<{ lines: unknown[]; stderr: string; code: number }> =>
  polarExportSession(t.dbPath, session, args);

describe('polar export', () => {
  it('records each reply as a canonical assistant message, streamed or not, whatever the provider', () => {
    const rows = t.store.requests.list('exp').map((c) => t.store.requests.get(c.id)!);
    expect(rows[0]!.assistantMessage).toMatchObject({
      role: 'assistant',
      reasoning_content: upstream.calls[0]!.reply.reasoning,
      tool_calls: [{ type: 'function', function: { name: 'list_files', arguments: upstream.calls[0]!.reply.toolCalls[0]!.arguments } }],
    });
    expect(rows[1]!.assistantMessage).toMatchObject({
      role: 'assistant',
      content: upstream.calls[1]!.reply.content,
      reasoning_content: upstream.calls[1]!.reply.reasoning,
    });
  });

  it('--format sft: one openai_format example per trace, the conversation sent upstream plus the reply', async () => {
    const { lines, stderr } = await polarExport(['--format', 'sft', '--strategy', 'per-request']);
    expect(stderr).toMatch(/export sft: 2 written, 0 left out/);
    const [first] = lines as { messages: Record<string, unknown>[]; tools: { function: { name: string } }[] }[];
    expect(first!.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(first!.messages[0]).toEqual({ role: 'user', content: 'Please use a tool to look around.' });
    expect(first!.messages[1]).toMatchObject({ tool_calls: [{ function: { name: 'list_files' } }] });
    expect(first!.tools.map((x) => x.function.name)).toEqual(['list_files']);
  });

  it('--format tokens: the trajectory records; --min-reward leaves out traces without a reward', async () => {
    const tokens = await polarExport(['--format', 'tokens', '--strategy', 'per-request']);
    expect(tokens.lines).toHaveLength(2);
    expect(tokens.lines[0]).toMatchObject({ session_id: 'exp', strategy: 'per-request', response_ids: upstream.calls[0]!.reply.ids });
    // Leaving everything out is a failure a script must notice, with the reasons counted.
    const rewarded = await polarExport(['--format', 'tokens', '--min-reward', '0.5']);
    expect(rewarded.lines).toHaveLength(0);
    expect(rewarded.code).toBe(1);
    expect(rewarded.stderr).toMatch(/0 written, 2 left out/);
    expect(rewarded.stderr).toMatch(/left out 2: no reward \(--min-reward\)/);
    expect(rewarded.stderr).toMatch(/POLAR_EMPTY_EXPORT.*nothing exported/);
  });

  it('--format nemo-gym: a Gym rollouts.jsonl row per session, whose model items carry the recorded token fields, as one append-only chain', async () => {
    // Issue 25: a session of two conversations is two traces; written as two rows, a Gym consumer
    // counted the session (and its reward) twice. It is left out and counted instead.
    const split = await polarExport(['--format', 'nemo-gym', '--strategy', 'per-request']);
    expect(split.lines).toHaveLength(0);
    expect(split.stderr).toMatch(/export nemo-gym: 0 written, 1 left out: 1 unmerged session\n/);
    const { lines, stderr } = await polarExport(['--format', 'nemo-gym', '--strategy', 'per-request'], 'exp-one');
    expect(stderr).toMatch(/export nemo-gym: 1 written, 0 left out\n/);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      agent_ref: { type: 'responses_api_agents', name: 'polar_agent' },
      _ng_task_index: 0,
      _ng_rollout_index: 0,
      task_id: null,
      group_id: null,
      reward: 0,
    });
    const first = lines[0] as {
      responses_create_params: { input: unknown[]; tools: { name: string }[] };
      response: { output: Record<string, unknown>[] };
      reward: null;
    };
    expect(first.responses_create_params.input).toEqual([
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Please use a tool to look around.' }] },
    ]);
    expect(first.responses_create_params.tools.map((x) => x.name)).toEqual(['list_files']);
    expect(first.response.output.map((o) => o.type)).toEqual(['reasoning', 'function_call']);
    const last = first.response.output.at(-1)!;
    expect(last).toMatchObject({ prompt_token_ids: upstream.calls[2]!.promptIds, generation_token_ids: upstream.calls[2]!.reply.ids });
    expect((last.generation_log_probs as number[]).length).toBe(upstream.calls[2]!.reply.ids.length);
    // NeMo-RL's contiguity rule, as it checks it: tokens so far must prefix the next call's prompt.
    for (const line of lines as { response: { output: Record<string, unknown>[] } }[]) {
      let seen: number[] = [];
      for (const item of line.response.output.filter((o) => Array.isArray(o.generation_token_ids))) {
        const prompt = item.prompt_token_ids as number[];
        expect(prompt.slice(0, seen.length)).toEqual(seen);
        seen = [...prompt, ...(item.generation_token_ids as number[])];
      }
    }
  });
});
