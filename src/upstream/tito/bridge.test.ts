import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../core/chat.js';
import { loadQwen3 } from '../../mock-server/qwen3.js';
import { sampleReply } from '../../mock-server/sampler.js';
import { bridgeTail, contextKey, findParent, messageKeys, replyMatches, tailAfterTurn, type ChainEntry } from './bridge.js';
import { BUNDLED_QWEN3, loadChatTemplate } from './chat-template.js';
import { qwen3ModelDir } from '../../core/bundled-tokenizer.js';

const template = loadChatTemplate(BUNDLED_QWEN3, qwen3ModelDir);
const qwen = loadQwen3();
const tools = [
  { type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } },
];
const kwargs = { enable_thinking: true };

/** One sampled turn: the ids a server would return for this reply, with non-canonical splits. */
function turn(promptIds: number[], messages: ChatMessage[], reply: ChatMessage, callId: string, reasoning: string): ChainEntry {
  const sampled = sampleReply(
    qwen,
    {
      reasoning,
      content: (reply.content as string) || undefined,
      toolCalls: reply.tool_calls?.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
    },
    { splitEvery: 2, seed: 1 },
  );
  expect(sampled.splits).toBeGreaterThan(0);
  return {
    callId,
    messagesKey: messageKeys(messages).at(-1)!,
    messageCount: messages.length,
    contextKey: contextKey(tools, kwargs),
    promptIds,
    sampledIds: sampled.ids,
    reply: { ...reply, reasoning_content: reasoning },
  };
}

describe('the Qwen3 chat template as polar loads it', () => {
  it('finds the turn end, the stop ids and the tool-call format', () => {
    expect(template.turnEnd.text).toBe('<|im_end|>');
    expect(template.stopIds).toContain(template.turnEnd.id);
    expect(template.toolFormat).toBe('hermes');
    expect(template.reasons).toBe(true);
  });
});

describe('bridging', () => {
  const system: ChatMessage = { role: 'system', content: 'You are a coding agent.' };
  const user: ChatMessage = { role: 'user', content: 'List the files.' };
  const call1: ChatMessage = {
    role: 'assistant',
    content: 'Let me look.',
    tool_calls: [{ id: 'call_a_0', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }],
  };
  const result: ChatMessage = { role: 'tool', tool_call_id: 'call_a_0', content: 'a.txt\nb.txt' };

  it('extends the previous prompt and sampled ids byte for byte, with the template’s own text for the new messages', () => {
    const messages1 = [system, user];
    const prompt1 = template.encode(template.render(messages1, { tools, addGenerationPrompt: true, kwargs }));
    const parent = turn(prompt1, messages1, call1, 'c1', 'I should list.');
    const messages2 = [system, user, { ...call1 }, result];
    const found = findParent(messages2, messageKeys(messages2), contextKey(tools, kwargs), [parent]);
    expect(found.parent?.callId).toBe('c1');
    const tail = bridgeTail(template, parent, messages2[2]!, [result], tools, kwargs);
    // The sampled turn ended with <|im_end|>, so nothing is added before the template's text.
    expect(tail.text).toBe('\n<|im_start|>user\n<tool_response>\na.txt\nb.txt\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
    expect(tail.text).toBe(tailAfterTurn(template, messages2.slice(0, 3), [result], tools, kwargs));
    const bridged = [...prompt1, ...parent.sampledIds, ...tail.ids];
    // A full re-render differs: the sampled splits are not what the tokenizer produces.
    const full = template.encode(template.render(messages2, { tools, addGenerationPrompt: true, kwargs }));
    expect(bridged.slice(0, prompt1.length + parent.sampledIds.length)).toEqual([...prompt1, ...parent.sampledIds]);
    expect(full.slice(0, bridged.length - tail.ids.length)).not.toEqual(bridged.slice(0, bridged.length - tail.ids.length));
  });

  it('adds the end-of-turn token after a turn cut by length', () => {
    const parent: ChainEntry = {
      callId: 'c1',
      messagesKey: '',
      messageCount: 1,
      contextKey: '',
      promptIds: [1, 2],
      sampledIds: [9707, 11],
      reply: { role: 'assistant', content: 'Hello,' },
    };
    const tail = bridgeTail(template, parent, { role: 'assistant', content: 'Hello,' }, [{ role: 'user', content: 'go on' }], undefined, {});
    expect(tail.ids[0]).toBe(template.turnEnd.id);
    expect(template.decode(tail.ids)).toBe(`<|im_end|>${tail.text}`);
  });

  it('cuts after the right turn even when the template drops earlier reasoning (a new user turn)', () => {
    const history: ChatMessage[] = [user, { role: 'assistant', content: 'Done.', reasoning_content: 'secret thoughts' }];
    const next: ChatMessage[] = [{ role: 'user', content: 'Now the next one.' }];
    const tail = tailAfterTurn(template, history, next, tools, kwargs);
    expect(tail).toBe('\n<|im_start|>user\nNow the next one.<|im_end|>\n<|im_start|>assistant\n');
  });

  it('is not moved by end-of-turn text inside the conversation (reasoning, tool output)', () => {
    const echo: ChatMessage = {
      role: 'assistant',
      content: '',
      reasoning_content: 'Qwen closes a turn with <|im_end|>; grep for it.',
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'bash', arguments: '{"command":"grep -r \'<|im_end|>\' ."}' } }],
    };
    const result: ChatMessage = { role: 'tool', tool_call_id: 'c', content: 'template.jinja: {{ "<|im_end|>" }}' };
    const reminder: ChatMessage = { role: 'user', content: '<system-reminder>keep going</system-reminder>' };
    const parent: ChainEntry = {
      callId: 'p',
      messagesKey: '',
      messageCount: 2,
      contextKey: '',
      promptIds: [1],
      sampledIds: [template.turnEnd.id],
      reply: echo,
    };
    const tail = bridgeTail(template, parent, echo, [result, reminder], tools, kwargs);
    expect(tail.text).toBe(
      '\n<|im_start|>user\n<tool_response>\ntemplate.jinja: {{ "<|im_end|>" }}\n</tool_response><|im_end|>\n<|im_start|>user\n<system-reminder>keep going</system-reminder><|im_end|>\n<|im_start|>assistant\n',
    );
    expect(tailAfterTurn(template, [system, user, echo], [result, reminder], tools, kwargs)).toBe(tail.text);
    // Only a new user turn: it is there, not lost.
    expect(bridgeTail(template, parent, echo, [reminder], tools, kwargs).text).toContain('keep going');
  });

  it('is not moved by the end text in a tool name, nor by the marker text in the conversation', () => {
    const echo: ChatMessage = {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'ba<|im_end|>sh', arguments: '{}' } }],
    };
    const result: ChatMessage = { role: 'tool', tool_call_id: 'c', content: 'ok' };
    const parent: ChainEntry = {
      callId: 'p',
      messagesKey: '',
      messageCount: 2,
      contextKey: '',
      promptIds: [1],
      sampledIds: [template.turnEnd.id],
      reply: echo,
    };
    expect(bridgeTail(template, parent, echo, [result], tools, kwargs).text).toBe(
      '\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('names why a call is rendered in full', () => {
    const messages1 = [system, user];
    const parent = turn([1], messages1, call1, 'c1', 'r');
    const ctx = contextKey(tools, kwargs);
    const rewritten = [system, { role: 'user', content: 'Summary of the conversation so far.' }];
    expect(findParent(rewritten, messageKeys(rewritten), ctx, [parent])).toEqual({ parent: null, reason: 'history-rewritten' });
    expect(findParent(messages1, messageKeys(messages1), ctx, [])).toEqual({ parent: null, reason: 'first-call' });
    const edited = [system, user, { ...call1, content: 'Something else.' }, result];
    expect(findParent(edited, messageKeys(edited), ctx, [parent])).toEqual({ parent: null, reason: 'reply-edited' });
    const next = [system, user, call1, result];
    expect(findParent(next, messageKeys(next), contextKey([], kwargs), [parent])).toEqual({ parent: null, reason: 'context-changed' });
    const foreign = [system, user, call1, result, { role: 'assistant', content: 'inserted' }, { role: 'user', content: 'x' }];
    expect(findParent(foreign, messageKeys(foreign), ctx, [parent])).toEqual({ parent: null, reason: 'foreign-assistant' });
  });

  it('matches an echoed reply on content, not on formatting', () => {
    const reply: ChatMessage = {
      role: 'assistant',
      content: 'Hi',
      reasoning_content: 'think',
      tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{"a":1,"b":[2]}' } }],
    };
    expect(
      replyMatches(
        {
          role: 'assistant',
          content: [{ type: 'text', text: 'Hi\n' }],
          tool_calls: [{ id: 'y', type: 'function', function: { name: 'f', arguments: '{"b": [2], "a": 1}' } }],
        },
        reply,
      ),
    ).toBe(true);
    expect(replyMatches({ role: 'assistant', content: 'Hi', reasoning_content: 'other', tool_calls: reply.tool_calls }, reply)).toBe(false);
    expect(
      replyMatches({ role: 'assistant', content: 'Hi', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{"a":2,"b":[2]}' } }] }, reply),
    ).toBe(false);
    expect(replyMatches({ role: 'assistant', content: 'Hi' }, reply)).toBe(false);
  });
});
