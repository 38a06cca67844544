import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CODECS } from '../providers/codecs.js';
import { normalizeRequest } from '../providers/normalize.js';
import { matchRoute } from '../proxy/route.js';
import { parsePrompt } from './prompt-parser.js';
import { loadQwen3 } from './qwen3.js';
import { renderPrompt, textOf, type ChatBody } from './render.js';
import { demoScript } from './script.js';

const qwen = loadQwen3();
const roundTrip = (body: ChatBody) => parsePrompt(qwen.decode(renderPrompt(qwen, body)));
const fn = (name: string, properties: Record<string, unknown>) => ({
  type: 'function',
  function: {
    name,
    description: `Runs ${name} "quoted"\nover two lines, naïve 日本語`,
    parameters: { type: 'object', properties, required: Object.keys(properties) },
  },
});
const call = (id: string, name: string, args: string) => ({ id, type: 'function', function: { name, arguments: args } });

/** What a script may read of a request: every one must come back from the prompt. */
function facts(body: ChatBody) {
  return {
    roles: body.messages.map((m) => m.role),
    texts: body.messages.map((m) => textOf(m.content)),
    toolResults: body.messages.filter((m) => m.role === 'tool').length,
    toolCalls: body.messages.map((m) =>
      ((m.tool_calls as { function: { name: string; arguments: unknown } }[] | undefined) ?? []).map((c) => [c.function.name, c.function.arguments]),
    ),
    tools: (body.tools ?? []).map((t) => (t as { function: unknown }).function),
    thinking: body.chat_template_kwargs?.enable_thinking !== false,
  };
}

describe('reading a Qwen3 prompt back into the chat request', () => {
  it('recovers system, tools, user, reasoning, tool calls and tool results of a multi-turn conversation', () => {
    const body: ChatBody = {
      messages: [
        { role: 'system', content: 'You are terse.\n\nReally.' },
        { role: 'user', content: 'list files, then read both — café 🚀' },
        { role: 'assistant', content: 'Looking.', reasoning_content: 'Need ls.', tool_calls: [call('a', 'Bash', '{"command": "ls -la"}')] },
        { role: 'tool', tool_call_id: 'a', content: 'a.ts\nb.ts' },
        {
          role: 'assistant',
          content: null,
          reasoning_content: 'Read both at once.',
          tool_calls: [call('b', 'Read', '{"path":"a.ts"}'), call('c', 'Read', '{"path": "b.ts", "n": {"x": [1, 2]}}')],
        },
        { role: 'tool', tool_call_id: 'b', content: 'export const a = 1;' },
        { role: 'tool', tool_call_id: 'c', content: '' },
      ],
      tools: [fn('Bash', { command: { type: 'string' } }), fn('Read', { path: { type: 'string' }, n: { type: 'object' } })],
    };
    const parsed = roundTrip(body);
    expect(facts(parsed)).toEqual(facts(body));
    expect(parsed.messages[0]).toEqual({ role: 'system', content: 'You are terse.\n\nReally.' });
    // Reasoning after the last user query is in the prompt; tool results pair with the calls in order.
    expect(parsed.messages[2]!.reasoning_content).toBe('Need ls.');
    expect(parsed.messages[4]!.reasoning_content).toBe('Read both at once.');
    const ids = (parsed.messages[4]!.tool_calls as { id: string }[]).map((c) => c.id);
    expect(parsed.messages.slice(5, 7).map((m) => m.tool_call_id)).toEqual(ids);
    expect(parsed.tools).toEqual(body.tools);
    expect(parsed.chat_template_kwargs).toBeUndefined();
    // Exact: rendering what was read back gives the same prompt, token for token.
    expect(renderPrompt(qwen, parsed)).toEqual(renderPrompt(qwen, body));

    // A new user query drops the earlier turns' reasoning from the prompt: it cannot come back.
    const next = roundTrip({ ...body, messages: [...body.messages, { role: 'user', content: '<system-reminder>keep going</system-reminder>' }] });
    expect(next.messages.map((m) => m.reasoning_content)).toEqual(body.messages.map(() => undefined).concat([undefined]));
    expect(facts(next).roles.at(-1)).toBe('user');
  });

  it('reads enable_thinking: false from the generation prompt, and a system turn without tools', () => {
    const body: ChatBody = {
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'hi' },
      ],
      chat_template_kwargs: { enable_thinking: false },
    };
    const parsed = roundTrip(body);
    expect(parsed).toEqual({
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'hi' },
      ],
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(roundTrip({ ...body, chat_template_kwargs: { enable_thinking: true } }).chat_template_kwargs).toBeUndefined();
  });

  it('tells no system message from an empty one when tools are offered', () => {
    const tools = [fn('Bash', { command: { type: 'string' } })];
    expect(roundTrip({ messages: [{ role: 'user', content: 'x' }], tools }).messages.map((m) => m.role)).toEqual(['user']);
    expect(
      roundTrip({
        messages: [
          { role: 'system', content: '' },
          { role: 'user', content: 'x' },
        ],
        tools,
      }).messages[0],
    ).toEqual({ role: 'system', content: '' });
  });

  it('keeps tool-call arguments byte for byte, and object arguments as the JSON the template wrote', () => {
    const body: ChatBody = {
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: 'see <tool_call> in text',
          tool_calls: [
            call('a', 'Bash', '{ "command" :"echo }\\n</tool_call>" }'),
            { id: 'b', type: 'function', function: { name: 'Bash', arguments: { command: 'pwd' } } },
          ],
        },
        { role: 'tool', content: 'ok' },
        { role: 'tool', content: '/w' },
      ],
    };
    const parsed = roundTrip(body);
    const calls = parsed.messages[1]!.tool_calls as { function: { name: string; arguments: string } }[];
    expect(parsed.messages[1]!.content).toBe('see <tool_call> in text');
    expect(calls.map((c) => c.function)).toEqual([
      { name: 'Bash', arguments: '{ "command" :"echo }\\n</tool_call>" }' },
      { name: 'Bash', arguments: '{"command": "pwd"}' },
    ]);
    expect(renderPrompt(qwen, parsed)).toEqual(renderPrompt(qwen, body));
  });
});

const ROOT = path.resolve(import.meta.dirname, '../../fixtures/requests');
const fixtures = fs
  .readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) =>
    fs
      .readdirSync(path.join(ROOT, d.name))
      .filter((f) => /^\d+-.*\.json$/.test(f))
      .map((f) => path.join(d.name, f)),
  );

describe.each(fixtures)('the recorded harness request %s, rendered and read back', (file) => {
  const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, file), 'utf8')) as { path: string; body: Record<string, unknown> };
  const route = matchRoute('POST', fixture.path);
  if (route.kind !== 'model-call') throw new Error(`${file}: not a model call`);
  const canonical = normalizeRequest(CODECS[route.provider].decodeRequest(fixture.body, { path: route.apiPath }), { contextWindow: 40_960 });
  const body: ChatBody = {
    messages: canonical.body.messages as ChatBody['messages'],
    ...(canonical.body.tools ? { tools: canonical.body.tools as unknown[] } : {}),
    ...(canonical.thinking === false ? { chat_template_kwargs: { enable_thinking: false } } : {}),
  };
  const parsed = roundTrip(body);

  it('gets the same answer from the demo script', () => {
    expect(demoScript(parsed)).toEqual(demoScript(body));
  });

  it('has the same roles, message texts, tool calls, tool results and tools', () => {
    const want = facts(body);
    // The template writes an assistant turn's text without the reasoning before it or leading newlines.
    want.texts = body.messages.map((m, i) => (m.role === 'assistant' ? textOf(m.content).replace(/^\n+/, '') : want.texts[i]!));
    expect(facts(parsed)).toEqual(want);
    expect(body.messages.length).toBeGreaterThan(0);
  });

  it('renders back to the same prompt ids', () => {
    expect(renderPrompt(qwen, parsed)).toEqual(renderPrompt(qwen, body));
  });
});
