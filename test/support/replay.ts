import fs from 'node:fs';
import path from 'node:path';
import type { ScriptedReply } from '../../src/mock-server/sampler.js';
import { findShellTool, type ScriptTool } from '../../src/mock-server/script.js';
import type { ChatBody } from '../../src/mock-server/server.js';

/**
 * Multi-turn sessions replayed from real harness recordings: the first request is a harness's own
 * (fixtures/requests/<harness>/01-first-call.json: its system prompt, tools, thinking settings), and
 * each next request is built the way that harness builds it — the reply appended as the harness
 * echoes it in its provider's format, then the tool results (or a user turn). Sent non-streaming;
 * the streaming paths are covered by the real CLIs (test/e2e).
 */

type Json = Record<string, any>;

export interface ReplyContent {
  text: string;
  reasoning: string;
  tools: { name: string; args: unknown }[];
}

export interface ReplayProvider {
  harness: string;
  /** The provider path, non-streaming. */
  path: string;
  first(): Json;
  /** The next request after `reply`: the reply echoed, then tool results (`output`, if given) or `userText`. */
  next(body: Json, reply: Json, userText: string, output?: string): Json;
  /** History rewritten to a summary (what a harness's compaction does). */
  compact(body: Json, summary: string): Json;
  withMaxTokens(body: Json, n: number): Json;
  content(reply: Json): ReplyContent;
}

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/requests');

function fixture(harness: string): { path: string; body: Json } {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, harness, '01-first-call.json'), 'utf8')) as { path: string; body: Json };
}

const clone = <T>(v: T): T => structuredClone(v);

const anthropic: ReplayProvider = {
  harness: 'claude-code',
  path: '/v1/messages',
  first: () => ({ ...clone(fixture('claude-code').body), stream: false }),
  next(body, reply, userText, output) {
    const b = clone(body);
    b.messages.push({ role: 'assistant', content: reply.content });
    const uses = (reply.content as Json[]).filter((c) => c.type === 'tool_use');
    b.messages.push(
      uses.length > 0
        ? {
            role: 'user',
            content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: output ?? `output of ${u.name} ${JSON.stringify(u.input)}` })),
          }
        : { role: 'user', content: [{ type: 'text', text: userText }] },
    );
    return b;
  },
  compact: (body, summary) => ({ ...clone(body), messages: [{ role: 'user', content: [{ type: 'text', text: summary }] }] }),
  withMaxTokens: (body, n) => ({ ...clone(body), max_tokens: n }),
  content(reply) {
    const blocks = reply.content as Json[];
    return {
      text: blocks
        .filter((c) => c.type === 'text')
        .map((c) => c.text)
        .join(''),
      reasoning: blocks
        .filter((c) => c.type === 'thinking')
        .map((c) => c.thinking)
        .join(''),
      tools: blocks.filter((c) => c.type === 'tool_use').map((c) => ({ name: c.name, args: c.input })),
    };
  },
};

const responses: ReplayProvider = {
  harness: 'codex',
  path: '/v1/responses',
  first: () => ({ ...clone(fixture('codex').body), stream: false }),
  next(body, reply, userText, toolOutput) {
    const b = clone(body);
    const output = reply.output as Json[];
    b.input.push(...output);
    const calls = output.filter((o) => o.type === 'function_call');
    if (calls.length > 0)
      for (const c of calls) b.input.push({ type: 'function_call_output', call_id: c.call_id, output: toolOutput ?? `output of ${c.name} ${c.arguments}` });
    else b.input.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: userText }] });
    return b;
  },
  compact: (body, summary) => ({ ...clone(body), input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: summary }] }] }),
  withMaxTokens: (body, n) => ({ ...clone(body), max_output_tokens: n }),
  content(reply) {
    const output = reply.output as Json[];
    return {
      text: output
        .filter((o) => o.type === 'message')
        .flatMap((o) => (o.content as Json[]).map((c) => c.text))
        .join(''),
      reasoning: output
        .filter((o) => o.type === 'reasoning')
        .flatMap((o) => [...((o.content ?? []) as Json[]), ...((o.summary ?? []) as Json[])].slice(0, 1).map((c) => c.text))
        .join(''),
      tools: output.filter((o) => o.type === 'function_call').map((o) => ({ name: o.name, args: JSON.parse(o.arguments) })),
    };
  },
};

const google: ReplayProvider = {
  harness: 'gemini-cli',
  path: '/v1beta/models/polar-model:generateContent',
  first: () => clone(fixture('gemini-cli').body),
  next(body, reply, userText, output) {
    const b = clone(body);
    const content = reply.candidates[0].content as Json;
    b.contents.push(content);
    const calls = (content.parts as Json[]).filter((p) => p.functionCall);
    b.contents.push(
      calls.length > 0
        ? {
            role: 'user',
            parts: calls.map((p) => ({
              functionResponse: {
                name: p.functionCall.name,
                ...(p.functionCall.id ? { id: p.functionCall.id } : {}),
                response: { output: output ?? `output of ${p.functionCall.name}` },
              },
            })),
          }
        : { role: 'user', parts: [{ text: userText }] },
    );
    return b;
  },
  compact: (body, summary) => ({ ...clone(body), contents: [{ role: 'user', parts: [{ text: summary }] }] }),
  withMaxTokens: (body, n) => ({ ...clone(body), generationConfig: { ...body.generationConfig, maxOutputTokens: n } }),
  content(reply) {
    const parts = (reply.candidates[0].content.parts ?? []) as Json[];
    return {
      text: parts
        .filter((p) => typeof p.text === 'string' && !p.thought)
        .map((p) => p.text)
        .join(''),
      reasoning: parts
        .filter((p) => typeof p.text === 'string' && p.thought)
        .map((p) => p.text)
        .join(''),
      tools: parts.filter((p) => p.functionCall).map((p) => ({ name: p.functionCall.name, args: p.functionCall.args })),
    };
  },
};

const chat: ReplayProvider = {
  harness: 'pi',
  path: '/v1/chat/completions',
  first: () => {
    const b = clone(fixture('pi').body);
    delete b.stream_options;
    return { ...b, stream: false };
  },
  next(body, reply, userText, output) {
    const b = clone(body);
    const message = reply.choices[0].message as Json;
    b.messages.push(message);
    const calls = (message.tool_calls ?? []) as Json[];
    if (calls.length > 0)
      for (const c of calls) b.messages.push({ role: 'tool', tool_call_id: c.id, content: output ?? `output of ${c.function.name} ${c.function.arguments}` });
    else b.messages.push({ role: 'user', content: userText });
    return b;
  },
  compact: (body, summary) => ({ ...clone(body), messages: [body.messages[0], { role: 'user', content: summary }] }),
  withMaxTokens: (body, n) => ({ ...clone(body), max_completion_tokens: n }),
  content(reply) {
    const m = reply.choices[0].message as Json;
    return {
      text: m.content ?? '',
      reasoning: m.reasoning_content ?? '',
      tools: ((m.tool_calls ?? []) as Json[]).map((c) => ({ name: c.function.name, args: JSON.parse(c.function.arguments) })),
    };
  },
};

export const REPLAY_PROVIDERS: readonly ReplayProvider[] = [anthropic, responses, google, chat];

/** The turns of a replayed session and what each one exercises. */
export const REPLAY_TURNS = [
  { note: 'first call: reasoning, text and two parallel tool calls' },
  { note: 'after the tool results: one tool call' },
  { note: 'cut by max_tokens (finish length)', maxTokens: 48 },
  { note: 'after a length-cut turn: the harness says go on' },
  { note: 'compaction: the history replaced by a summary', compact: true },
  { note: 'after the compaction: the final answer' },
] as const;

export const COMPACTION_SUMMARY = 'This session continues an earlier conversation. Summary: the files were listed and README.md was read.';

/**
 * The mock model's side of the replay, by call number: reasoning on every turn (when the request
 * allows thinking), parallel tool calls, a long answer for the length cut, non-ASCII text.
 */
export function replayScript(body: ChatBody, call: number): ScriptedReply {
  const thinking = body.chat_template_kwargs?.enable_thinking !== false;
  const shell = findShellTool((body.tools ?? []) as ScriptTool[]);
  const think = (t: string) => (thinking ? { reasoning: t } : {});
  const run = (cmd: string) => ({ name: shell?.name ?? 'bash', arguments: shell ? shell.args(cmd) : { command: cmd } });
  switch (call % REPLAY_TURNS.length) {
    case 0:
      return {
        ...think('Two things to look at: the file list and the readme.'),
        content: 'Let me look at both.',
        toolCalls: [run('ls -la'), run('cat README.md')],
      };
    case 1:
      return { ...think('Now count the lines — naïvely, with wc.'), toolCalls: [run('wc -l main.py')] };
    case 2:
      return {
        ...think('Explain at length.'),
        content:
          'Here is a long explanation of the project layout, which goes on for a while: the readme describes the demo, the script prints a greeting, and there is nothing else of note in this small workspace — café, 日本語, 🚀.',
      };
    case 3:
      return { ...think('The user wants me to continue.'), content: 'Continuing: one more check.', toolCalls: [run('git status')] };
    case 4:
      return { ...think('After the summary, check the file again.'), toolCalls: [run('cat main.py')] };
    default:
      return { ...think('All done.'), content: 'Done: the workspace has a readme and a one-line script.' };
  }
}

/** Runs the replayed session against a proxy (its first `turns` turns; all by default); returns each reply's JSON. */
export async function replaySession(provider: ReplayProvider, baseUrl: string, session: string, turns: number = REPLAY_TURNS.length): Promise<Json[]> {
  const replies: Json[] = [];
  let body = provider.first();
  for (let i = 0; i < Math.min(turns, REPLAY_TURNS.length); i++) {
    const turn = REPLAY_TURNS[i]!;
    if (i > 0) body = provider.next(body, replies[i - 1]!, 'Go on.');
    if ('compact' in turn) body = provider.compact(body, COMPACTION_SUMMARY);
    const sent = 'maxTokens' in turn ? provider.withMaxTokens(body, turn.maxTokens) : body;
    const res = await fetch(`${baseUrl}/s/${session}${provider.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer polar-test', 'x-api-key': 'polar-test' },
      body: JSON.stringify(sent),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${provider.harness} turn ${i} (${turn.note}): HTTP ${res.status}: ${text.slice(0, 500)}`);
    replies.push(JSON.parse(text) as Json);
  }
  return replies;
}
