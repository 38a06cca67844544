import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CanonicalRequest, ChatMessage } from '../../src/core/chat.js';
import { CODECS } from '../../src/providers/codecs.js';
import { normalizeRequest } from '../../src/providers/normalize.js';
import { matchRoute } from '../../src/proxy/route.js';
import { loadQwen3, textOf } from '../support/reference-upstream/index.js';

/**
 * Real requests recorded from the real harness CLIs (fixtures/requests/, see its README): each must
 * decode without losing a message, tool, tool call or tool result, and what it decodes to must
 * render with the real Qwen3 chat template with all of that in the prompt.
 */
const ROOT = path.resolve(__dirname, '../../fixtures/requests');
const fixtures = fs
  .readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) =>
    fs
      .readdirSync(path.join(ROOT, d.name))
      .filter((f) => /^\d+-.*\.json$/.test(f))
      .map((f) => path.join(d.name, f)),
  );

interface Fixture {
  harness: string;
  path: string;
  body: Record<string, unknown>;
}

/** What a request says, in provider-neutral facts: every one must survive decoding. */
interface Facts {
  texts: string[];
  toolNames: string[];
  callIds: string[];
  resultIds: string[];
  reasoning: string[];
}

type Rec = Record<string, unknown>;
const recs = (v: unknown): Rec[] => (Array.isArray(v) ? v.filter((x): x is Rec => typeof x === 'object' && x !== null) : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function anthropicFacts(b: Rec): Facts {
  const f: Facts = { texts: [], toolNames: [], callIds: [], resultIds: [], reasoning: [] };
  const system = typeof b.system === 'string' ? [{ text: b.system }] : recs(b.system);
  for (const s of system) if (!str(s.text).startsWith('x-anthropic-billing-header:')) f.texts.push(str(s.text));
  for (const m of recs(b.messages)) {
    if (typeof m.content === 'string') f.texts.push(m.content);
    for (const block of recs(m.content)) {
      if (block.type === 'text') f.texts.push(str(block.text));
      if (block.type === 'thinking') f.reasoning.push(str(block.thinking));
      if (block.type === 'tool_use') f.callIds.push(str(block.id));
      if (block.type === 'tool_result') {
        f.resultIds.push(str(block.tool_use_id));
        f.texts.push(
          typeof block.content === 'string'
            ? block.content
            : recs(block.content)
                .map((c) => str(c.text))
                .join('\n'),
        );
      }
    }
  }
  f.toolNames = recs(b.tools)
    .filter((t) => t.input_schema !== undefined)
    .map((t) => str(t.name));
  return f;
}

function responsesFacts(b: Rec): Facts {
  const f: Facts = { texts: [], toolNames: [], callIds: [], resultIds: [], reasoning: [] };
  if (typeof b.instructions === 'string') f.texts.push(b.instructions);
  for (const item of recs(b.input)) {
    const type = item.type ?? 'message';
    if (type === 'message') f.texts.push(...(typeof item.content === 'string' ? [item.content] : recs(item.content).map((c) => str(c.text))));
    if (type === 'reasoning')
      f.reasoning.push(
        recs(item.content)
          .map((c) => str(c.text))
          .join('\n') ||
          recs(item.summary)
            .map((c) => str(c.text))
            .join('\n'),
      );
    if (type === 'function_call') f.callIds.push(str(item.call_id));
    if (type === 'function_call_output') {
      f.resultIds.push(str(item.call_id));
      f.texts.push(str(item.output));
    }
  }
  for (const t of recs(b.tools)) {
    if (t.type === 'function') f.toolNames.push(str(t.name));
    if (t.type === 'namespace') for (const inner of recs(t.tools)) f.toolNames.push(`${str(t.name)}__${str(inner.name)}`);
  }
  return f;
}

function geminiFacts(b: Rec): Facts {
  const f: Facts = { texts: [], toolNames: [], callIds: [], resultIds: [], reasoning: [] };
  for (const p of recs((b.systemInstruction as Rec | undefined)?.parts)) f.texts.push(str(p.text));
  for (const c of recs(b.contents)) {
    for (const p of recs(c.parts)) {
      if (typeof p.text === 'string') (p.thought ? f.reasoning : f.texts).push(p.text);
      if (p.functionCall) f.callIds.push(str((p.functionCall as Rec).id));
      if (p.functionResponse) f.resultIds.push(str((p.functionResponse as Rec).id));
    }
  }
  for (const t of recs(b.tools)) for (const d of recs(t.functionDeclarations)) f.toolNames.push(str(d.name));
  return f;
}

function chatFacts(b: Rec): Facts {
  const f: Facts = { texts: [], toolNames: [], callIds: [], resultIds: [], reasoning: [] };
  for (const m of recs(b.messages)) {
    f.texts.push(...(typeof m.content === 'string' ? [m.content] : recs(m.content).map((c) => str(c.text))));
    if (typeof m.reasoning_content === 'string') f.reasoning.push(m.reasoning_content);
    for (const c of recs(m.tool_calls)) f.callIds.push(str(c.id));
    if (m.role === 'tool') f.resultIds.push(str(m.tool_call_id));
  }
  f.toolNames = recs(b.tools).map((t) => str((t.function as Rec).name));
  return f;
}

const FACTS = {
  'anthropic-messages': anthropicFacts,
  'openai-responses': responsesFacts,
  'google-generate-content': geminiFacts,
  'openai-chat': chatFacts,
} as const;

/** The canonical request as vLLM would flatten it for a string-content chat template. */
function renderable(messages: ChatMessage[]) {
  return messages.map((m) => ({ ...m, content: typeof m.content === 'string' || m.content == null ? (m.content ?? '') : textOf(m.content) }));
}

describe.each(fixtures)('recorded harness request %s', (file) => {
  const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, file), 'utf8')) as Fixture;
  const route = matchRoute('POST', fixture.path);
  if (route.kind !== 'model-call') throw new Error(`${file}: ${fixture.path} is not a model call`);
  const codec = CODECS[route.provider];
  const facts = FACTS[route.provider](fixture.body);
  let canonical: CanonicalRequest;

  it('decodes, with every message, tool, tool call and tool result accounted for', () => {
    canonical = normalizeRequest(codec.decodeRequest(fixture.body, { path: route.apiPath }), { contextWindow: 40_960 });
    const messages = canonical.body.messages;
    const all = JSON.stringify(messages);
    for (const text of facts.texts.filter((t) => t.trim().length > 0)) {
      expect(all, `text lost: ${text.slice(0, 80)}`).toContain(JSON.stringify(text.trim()).slice(1, -1));
    }
    // Tool calls and results keep their ids (calls the harness sent without one get a stable id).
    const callIds = messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id));
    expect(callIds).toHaveLength(facts.callIds.length);
    facts.callIds.forEach((id, i) => id && expect(callIds[i]).toBe(id));
    const resultIds = messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
    expect(resultIds).toHaveLength(facts.resultIds.length);
    facts.resultIds.forEach((id, i) => id && expect(resultIds[i]).toBe(id));
    // Every tool result answers a call made earlier in the same conversation.
    const calls = new Set(messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
    for (const m of messages.filter((m) => m.role === 'tool')) expect(calls.has(m.tool_call_id)).toBe(true);
    expect(messages.map((m) => m.reasoning_content).filter(Boolean)).toEqual(facts.reasoning.filter(Boolean));
    const tools = (canonical.body.tools ?? []) as { function: { name: string } }[];
    expect(tools.map((t) => t.function.name)).toEqual(facts.toolNames);
    expect(messages.some((m) => m.role === 'developer')).toBe(false);
    // Claude Code's per-request billing line never goes upstream.
    expect(all).not.toContain('x-anthropic-billing-header');
  });

  it('renders with the Qwen3 chat template, tools and tool results in the prompt', () => {
    const qwen = loadQwen3();
    const prompt = qwen.render(renderable(canonical.body.messages), {
      ...(canonical.body.tools ? { tools: canonical.body.tools } : {}),
      enableThinking: canonical.thinking ?? true,
    });
    expect(prompt.startsWith('<|im_start|>')).toBe(true);
    expect(prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
    for (const name of facts.toolNames) expect(prompt).toContain(`"name": ${JSON.stringify(name)}`);
    const results = canonical.body.messages.filter((m) => m.role === 'tool');
    for (const r of results) expect(prompt).toContain(`<tool_response>\n${(typeof r.content === 'string' ? r.content : textOf(r.content)).slice(0, 40)}`);
    const lastUser = [...canonical.body.messages].reverse().find((m) => m.role === 'user');
    if (lastUser) expect(prompt).toContain(textOf(lastUser.content).slice(0, 40) || String(lastUser.content).slice(0, 40));
    expect(qwen.encode(prompt).length).toBeGreaterThan(100);
  });
});

it('found the recorded requests of all five harnesses', () => {
  expect(new Set(fixtures.map((f) => f.split(path.sep)[0]))).toEqual(new Set(['claude-code', 'codex', 'gemini-cli', 'pi', 'qwen-code']));
});
