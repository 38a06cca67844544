import OpenAI from 'openai';
import type { ReferenceUpstream } from './reference-upstream/index.js';
import type { TestProxy } from './start-proxy.js';

export const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'list_files', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

/** One agent's tool-using conversation through the proxy, echoing each reply (and its reasoning) back. */
export async function converse(t: TestProxy, session: string, agent: string, turns: number, opts: { maxTokensOnTurn?: number } = {}): Promise<void> {
  const client = new OpenAI({ baseURL: t.proxy.baseUrl(session), apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-polar-agent': agent } });
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: `You are ${agent}.` },
    { role: 'user', content: 'Please use a tool to look around.' },
  ];
  for (let turn = 0; turn < turns; turn++) {
    const reply = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, ...(opts.maxTokensOnTurn === turn ? { max_tokens: 5 } : {}) });
    const message = reply.choices[0]!.message;
    messages.push({
      role: 'assistant',
      content: message.content ?? '',
      ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}),
      ...({ reasoning_content: (message as unknown as { reasoning_content?: string }).reasoning_content } as object),
    });
    for (const call of message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: `file-${turn}.ts` });
    if (!message.tool_calls) messages.push({ role: 'user', content: `Now step ${turn + 2}.` });
  }
}

/**
 * A session with everything a reader of recordings meets (11 calls): a main agent of 3 turns with a
 * length-cut turn, two interleaved sub-agents, a compaction (history rewritten), a side call without
 * tools and a failed call. Against the reference upstream: real Qwen3 template, thinking on (earlier
 * <think> blocks stripped from history, so turns break), non-canonical sampled splits.
 */
export async function recordMixedSession(t: TestProxy, upstream: ReferenceUpstream, session: string): Promise<void> {
  await converse(t, session, 'main', 3, { maxTokensOnTurn: 2 });
  await Promise.all([converse(t, session, 'sub-a', 2), converse(t, session, 'sub-b', 2)]);
  const compactor = new OpenAI({ baseURL: t.proxy.baseUrl(session), apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-polar-agent': 'compactor' } });
  const compact = (content: string) =>
    compactor.chat.completions.create({
      model: 'm',
      tools: TOOLS,
      messages: [
        { role: 'system', content: 'You are compactor.' },
        { role: 'user', content },
      ],
    });
  // Two calls in turn: the second's prompt replaces the first's history, as a compaction does.
  await compact('Start a long task.');
  await compact('Summary of the work so far: started a long task. Continue.');
  const side = new OpenAI({ baseURL: t.proxy.baseUrl(session), apiKey: 'x', maxRetries: 0 });
  await side.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Write a 3-word title.' }] });
  upstream.fault('http-500');
  await side.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: TOOLS }).catch(() => undefined);
}
