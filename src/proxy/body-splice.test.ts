import { describe, expect, it } from 'vitest';
import { CODECS } from '../providers/codecs.js';
import { normalizeRequest } from '../providers/normalize.js';
import { createVllmUpstream } from '../upstream/vllm/index.js';
import { memberSpans, spliceBody } from './body-splice.js';
import { parseAsBytes, prepareFromBytes } from './wire-body.js';

const CALL = { id: 'req_1', sessionId: 's', agentId: 'main' };
const upstream = createVllmUpstream({ baseUrl: 'http://127.0.0.1:9' });

/** A Chat request as a harness might write it: indented, non-ASCII, a developer message, earlier reasoning, escapes JSON.stringify would not write. */
function harnessText(): string {
  const body = {
    model: 'qwen',
    messages: [
      { role: 'developer', content: 'Sois précis — 日本語 🚀' },
      { role: 'user', content: 'Lis {"a": [1, "]"]} et \\ "ceci"' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'Je lis le fichier…',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'contenu: naïve café\n\tfin\\' },
      { role: 'user', content: 'Et après ?' },
    ],
    tools: [
      { type: 'function', function: { name: 'read', description: 'Lit un fichier', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
    ],
    max_completion_tokens: 1.0e3,
    stream: false,
  };
  return JSON.stringify(body, null, 2).replace('Et après ?', 'Et après ?\\u0020').replace('"stream": false', '"stream": true, "stream": false');
}

function viaBytes(bytes: Buffer, servedModel: string | null = 'Qwen/Qwen3-8B'): Buffer | null {
  const json = parseAsBytes(bytes);
  const got = prepareFromBytes(json, CODECS['openai-chat'], upstream, { path: '/v1/chat/completions', contextWindow: 32_768, servedModel, call: CALL, bytes });
  return got?.upstreamReq.bytes ?? null;
}

function viaText(text: string): unknown {
  const canonical = normalizeRequest(CODECS['openai-chat'].decodeRequest(JSON.parse(text), { path: '/v1/chat/completions' }), { contextWindow: 32_768 });
  return JSON.parse(upstream.prepare(canonical, 'Qwen/Qwen3-8B').text);
}

describe('the Chat body written with the request’s own bytes', () => {
  it('copies every message and tool the adapter kept, and parses to what the text path sends', () => {
    const text = harnessText();
    const bytes = Buffer.from(text, 'utf8');
    const sent = viaBytes(bytes)!;
    expect(sent).not.toBeNull();
    expect(JSON.parse(sent.toString('utf8'))).toStrictEqual(viaText(text));
    // Kept by the adapter: the harness's bytes, indentation and escapes included.
    const spans = memberSpans(bytes)!;
    const messages = spans.get('messages')!.items!;
    for (const kept of [1, 3, 4]) expect(sent.includes(bytes.subarray(...messages[kept]!)), `message ${kept}`).toBe(true);
    expect(sent.includes(Buffer.from('Et après ?\\u0020', 'utf8'))).toBe(true);
    expect(sent.includes(bytes.subarray(...spans.get('tools')!.span))).toBe(true);
    expect(bytes.subarray(...spans.get('tools')!.span).includes('\n')).toBe(true);
    // Rewritten by it (developer → system, reasoning under vLLM's name too): serialised.
    expect(sent.toString('utf8')).toContain('{"role":"system","content":"Sois précis — 日本語 🚀"}');
    expect(sent.toString('utf8')).toContain('"reasoning":"Je lis le fichier…"');
    // The flags and the numbers the adapter set are its own; the harness's `stream` duplicates are gone.
    const upstreamBody = JSON.parse(sent.toString('utf8')) as Record<string, unknown>;
    expect(upstreamBody).toMatchObject({ model: 'Qwen/Qwen3-8B', stream: false, logprobs: true, return_token_ids: true, max_tokens: 1000 });
    expect(sent.toString('utf8').match(/"stream"/g)).toHaveLength(1);
  });

  it('is byte for byte JSON.stringify’s where the harness wrote the request as JSON.stringify does', () => {
    const compact = JSON.stringify(JSON.parse(harnessText()));
    const sent = viaBytes(Buffer.from(compact, 'utf8'))!;
    expect(sent.equals(Buffer.from(JSON.stringify(viaText(compact)), 'utf8'))).toBe(true);
  });

  it('serialises what shares nothing as JSON.stringify does, and still copies a shared value however deep the body holds it', () => {
    const bytes = Buffer.from('{ "a" : [ 1 , { "b" : "é" } ] , "t" : { "x" : 1 } }', 'utf8');
    const parsed = parseAsBytes(bytes) as { a: unknown[]; t: object };
    // A translated body: new objects all through, nothing of the request's.
    const fresh = { model: 'm', messages: [{ role: 'user', content: (parsed.a[1] as { b: string }).b }], n: [1, null, { y: [true] }] };
    expect(spliceBody(bytes, parsed, fresh)!.equals(Buffer.from(JSON.stringify(fresh), 'latin1'))).toBe(true);
    // The request's own objects, two and three levels down in new ones: copied with their spacing.
    const mixed = { outer: [{ inner: parsed.t }, 2], deep: { deeper: { a: parsed.a } } };
    expect(spliceBody(bytes, parsed, mixed)!.toString('utf8')).toBe('{"outer":[{"inner":{ "x" : 1 }},2],"deep":{"deeper":{"a":[ 1 , { "b" : "é" } ]}}}');
  });

  it('leaves a body with a character that is not a byte to the text path', () => {
    expect(viaBytes(Buffer.from(harnessText(), 'utf8'), 'модель')).toBeNull();
    expect(spliceBody(Buffer.from('{"a":[{"b":1}]}'), { a: [{ b: 1 }] }, { model: 'модель' })).toBeNull();
  });
});

describe('memberSpans', () => {
  it('finds each top-level value and each element of a top-level array, past strings that hold brackets, quotes and backslashes', () => {
    const text = ' {\n "a" : [ {"x":"]}\\"{["} , "\\\\" ,-1.5e+3,true ,null,[[]] ] ,"b":{"c":"}"},\t"n":-0.25 ,"s":"q\\"\\\\","a":[1] , "e":[] , "o":{} } ';
    const bytes = Buffer.from(text);
    const spans = memberSpans(bytes)!;
    const slice = ([start, end]: readonly [number, number]) => JSON.parse(text.slice(start, end)) as unknown;
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect([...spans.keys()]).toEqual(['a', 'b', 'n', 's', 'e', 'o']);
    for (const [key, member] of spans) expect(slice(member.span), key).toStrictEqual(parsed[key]);
    // The repeated key keeps its last value, as JSON.parse does; an earlier one's elements are gone with it.
    expect(spans.get('a')!.items!.map(slice)).toStrictEqual([1]);
    expect(spans.get('e')!.items).toEqual([]);
    expect(spans.get('b')!.items).toBeUndefined();
    const first = memberSpans(Buffer.from(text.replace(',"a":[1]', '')))!;
    expect(first.get('a')!.items!.map(slice)).toStrictEqual([{ x: ']}"{[' }, '\\', -1500, true, null, [[]]]);
  });

  it('reads keys as parseAsBytes does, and refuses what is not one object', () => {
    const bytes = Buffer.from('{"cl\\u0065 é":1,"__proto__":{"z":2}}', 'utf8');
    const parsed = parseAsBytes(bytes) as Record<string, unknown>;
    expect([...memberSpans(bytes)!.keys()]).toEqual(Object.keys(parsed));
    expect(Object.keys(parsed)).toEqual([`cle ${Buffer.from('é', 'utf8').toString('latin1')}`, '__proto__']);
    for (const bad of ['[1]', '{"a":1', '{"a" 1}', '{"a":}', '"x"', '{"a":"b}']) expect(memberSpans(Buffer.from(bad)), bad).toBeNull();
    expect(memberSpans(Buffer.from(' { } '))!.size).toBe(0);
  });
});
